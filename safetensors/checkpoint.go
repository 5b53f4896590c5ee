package safetensors

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/k3-project/k3/storage"
)

// IndexFileName is the index of a sharded checkpoint (§7.4).
const IndexFileName = "model.safetensors.index.json"

// Checkpoint is an open model: one shard file or a directory of shards,
// indexed by tensor name. Its methods are safe for concurrent use.
type Checkpoint struct {
	shards   []*shard
	all      []Tensor // every tensor, in (shard, offset) order; ids index it
	ptrsOnce sync.Once
	ptrs     []*Tensor
	byName   *table
	hasIndex bool
	expected map[string]string // WithIncomplete: listed by the index, not found
	seed     maphash.Seed
	opts     options
	mu       sync.Mutex
	warnings []string
	closed   atomic.Bool
}

// shard is one open file.
type shard struct {
	path string
	base string
	f    storage.File
	size int64

	meta       map[string]string
	dataOffset int64
	p          *parsed // until merge builds the Tensor values
	first, n   int     // the shard's tensors are all[first : first+n]

	mapOnce  sync.Once
	mapped   []byte
	mapErr   error
	isMapped atomic.Bool

	directOnce sync.Once
	direct     *storage.Reader

	sums checksums // ChecksumKey, parsed on first use
}

// Open opens a single .safetensors file or a checkpoint directory. A
// directory with model.safetensors.index.json is opened through the index,
// which is verified against the shards (§7.4); otherwise every
// *.safetensors file in it is opened, in byte-wise name order. Every header
// is validated (§7.3) before Open returns.
//
// With an index, the shard headers are parsed while the index is, so a
// *.safetensors file the index does not name may be read; it is then closed
// without being indexed, any error in it is ignored, and it is reported
// through Warnings. Shards are kept in byte-wise name order either way, and
// Tensors lists tensors in (shard, offset) order.
func Open(path string, opts ...Option) (*Checkpoint, error) {
	o := defaultOptions()
	for _, fn := range opts {
		fn(&o)
	}
	if o.workers <= 0 {
		o.workers = runtime.GOMAXPROCS(0)
	}
	c := &Checkpoint{opts: o, seed: maphash.MakeSeed()}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		err = c.openShards([]string{path})
	} else {
		err = c.openDir(path)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Checkpoint) openDir(dir string) error {
	idxPath := filepath.Join(dir, IndexFileName)
	if _, err := os.Stat(idxPath); err == nil {
		return c.openIndexed(dir, idxPath)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	names, err := listShards(dir)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return newErr(dir, "", -1, ErrNoShards, "")
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	return c.openShards(paths)
}

// listShards returns the *.safetensors entries of dir in byte-wise order.
func listShards(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".safetensors") || e.IsDir() {
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// openShards opens and validates every path concurrently, then builds the
// name index in (shard, offset) order.
func (c *Checkpoint) openShards(paths []string) error {
	shards, errs := c.parseShards(paths, nil)
	c.shards = shards
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return c.merge()
}

// parseShards opens and validates paths on the worker goroutines. When
// extra is not nil, the first worker runs it before taking shards: one pool
// of GOMAXPROCS goroutines then does all the work, instead of an extra
// goroutine that the scheduler would have to keep preempting.
func (c *Checkpoint) parseShards(paths []string, extra func()) ([]*shard, []error) {
	shards := make([]*shard, len(paths))
	errs := make([]error, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := max(1, min(c.opts.workers, len(paths)))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w == 0 && extra != nil {
				extra()
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) {
					return
				}
				shards[i], errs[i] = c.openShard(paths[i])
			}
		}()
	}
	wg.Wait()
	return shards, errs
}

func (c *Checkpoint) openShard(path string) (*shard, error) {
	f, err := c.opts.open(path)
	if err != nil {
		return nil, err
	}
	// Names are checked for uniqueness across all shards in merge.
	p, size, err := readHeader(path, f, c.seed, false)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &shard{path: path, base: filepath.Base(path), f: f, size: size,
		meta: p.metadata, dataOffset: p.dataOffset, p: p, n: len(p.entries)}, nil
}

// ReadHeader reads and validates the header of one safetensors file through
// r (its size comes from r.Stat); path only labels errors.
func ReadHeader(path string, r storage.File) (*Header, error) {
	p, _, err := readHeader(path, r, maphash.MakeSeed(), true)
	if err != nil {
		return nil, err
	}
	h := &Header{Metadata: p.metadata, DataOffset: p.dataOffset, Tensors: make([]Tensor, len(p.entries))}
	p.fill(h.Tensors, path, 0)
	return h, nil
}

func readHeader(path string, f storage.File, seed maphash.Seed, dedupe bool) (*parsed, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, newErr(path, "", -1, ErrNotRegular, "mode "+st.Mode().Type().String())
	}
	size := st.Size()
	if size < 8 {
		return nil, 0, newErr(path, "", -1, ErrFileTooSmall, "file is "+strconv.FormatInt(size, 10)+" bytes")
	}
	var pre [8]byte
	if err := readFull(f, pre[:], 0); err != nil {
		return nil, 0, withFile(err, path)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	// Checked in this order so that an all-0xFF length is reported as too
	// large; the comparison with the file uses subtraction, never 8+n.
	switch {
	case n < 2:
		return nil, 0, newErr(path, "", -1, ErrHeaderTooSmall, "N = "+strconv.FormatUint(n, 10))
	case n > MaxHeaderSize:
		return nil, 0, newErr(path, "", -1, ErrHeaderTooLarge, "N = "+strconv.FormatUint(n, 10))
	case n > uint64(size-8):
		return nil, 0, newErr(path, "", -1, ErrHeaderBeyondFile,
			"N = "+strconv.FormatUint(n, 10)+", file is "+strconv.FormatInt(size, 10)+" bytes")
	}
	hdr := make([]byte, n)
	if err := readFull(f, hdr, 8); err != nil {
		return nil, 0, withFile(err, path)
	}
	h, err := parseHeader(path, hdr, size-8-int64(n), seed, dedupe)
	return h, size, err
}

// withFile fills in the file of an *Error that lacks one.
func withFile(err error, path string) error {
	var e *Error
	if errors.As(err, &e) && e.File == "" {
		e.File = path
	}
	return err
}

// merge builds every Tensor value in one allocation (shard i gets id i) and
// refuses a name held twice. The hash table is filled in parallel; if that
// finds a duplicate, a serial pass reports the first one in (shard, offset)
// order so the error does not depend on scheduling.
func (c *Checkpoint) merge() error {
	total := 0
	for _, s := range c.shards {
		s.first = total
		total += s.n
	}
	c.all = make([]Tensor, total)
	c.byName = newTable(total)
	all := c.all
	// Shards are handed out one at a time (the tensor count only sizes the
	// number of goroutines). Each tensor is inserted right after it is
	// written; the compare-and-swap that publishes its id orders that write
	// before any other goroutine's name comparison with it.
	var next atomic.Int64
	ok := parallel(total, c.opts.workers, func(int, int) bool {
		dup := false
		for !dup {
			i := int(next.Add(1) - 1)
			if i >= len(c.shards) {
				break
			}
			s := c.shards[i]
			s.p.fillIndex(all[s.first:s.first+s.n], s.path, int32(i), func(k int, h uint64) {
				t := &all[s.first+k]
				if _, ok := c.byName.insertShared(h, int32(s.first+k), func(j int32) bool { return all[j].Name == t.Name }); !ok {
					dup = true
				}
			})
			s.p = nil
		}
		return !dup
	})
	if ok {
		return nil
	}
	// Finish filling whatever a failed worker left, then report the first
	// duplicate in (shard, offset) order so the error does not depend on
	// scheduling.
	for i, s := range c.shards {
		if s.p != nil {
			s.p.fill(all[s.first:s.first+s.n], s.path, int32(i))
			s.p = nil
		}
	}
	tab := newTable(total)
	for id := range all {
		t := &all[id]
		if j, ok := tab.insert(maphash.String(c.seed, t.Name), int32(id), func(k int32) bool { return all[k].Name == t.Name }); !ok {
			if all[j].shard == t.shard {
				return newErr(t.File, t.Name, -1, ErrDuplicateKey, "twice in the header")
			}
			return newErr(t.File, t.Name, -1, ErrDuplicateTensor, "also in "+all[j].File)
		}
	}
	return newErr("", "", -1, ErrDuplicateTensor, "internal: parallel and serial checks disagree")
}

func (c *Checkpoint) warn(msg string) {
	c.mu.Lock()
	c.warnings = append(c.warnings, msg)
	c.mu.Unlock()
	if c.opts.warn != nil {
		c.opts.warn(msg)
	}
}

// Warnings returns the non-fatal findings so far (stray shards, tolerated
// index disagreements, direct-I/O fallbacks).
func (c *Checkpoint) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.warnings)
}

// Tensor returns the tensor with exactly this name.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	id, ok := c.byName.find(maphash.String(c.seed, name), func(k int32) bool { return c.all[k].Name == name })
	if !ok {
		return nil, false
	}
	return &c.all[id], true
}

// Require returns the named tensor or a *MissingTensorError saying which
// shard the index expects to hold it and why it is not there.
func (c *Checkpoint) Require(name string) (*Tensor, error) {
	if t, ok := c.Tensor(name); ok {
		return t, nil
	}
	e := &MissingTensorError{Name: name}
	if !c.hasIndex {
		e.State = NoIndex
		return nil, e
	}
	shardName, ok := c.expected[name]
	if !ok {
		// After a successful open every other name the index lists is a
		// tensor, so an unknown name is simply not referenced.
		e.State = NotReferenced
		return nil, e
	}
	e.Shard = shardName
	e.State = ShardAbsent
	for _, s := range c.shards {
		if s.base == shardName {
			e.State = ShardLacking
		}
	}
	return nil, e
}

// Tensors returns every tensor in (shard, offset) order. The slice is
// shared; do not modify it.
func (c *Checkpoint) Tensors() []*Tensor {
	c.ptrsOnce.Do(func() {
		c.ptrs = make([]*Tensor, len(c.all))
		for i := range c.all {
			c.ptrs[i] = &c.all[i]
		}
	})
	return c.ptrs
}

// Len returns the number of tensors.
func (c *Checkpoint) Len() int { return len(c.all) }

// Listed returns the number of tensors the checkpoint accounts for: Len
// plus, when opened WithIncomplete, the tensors its index lists that are
// absent. Binders bound what a configuration may ask for by it, so a
// partial download still gets its complete list of missing tensors.
func (c *Checkpoint) Listed() int { return len(c.all) + len(c.expected) }

// Shards returns the paths of the open shard files, in open order.
func (c *Checkpoint) Shards() []string {
	p := make([]string, len(c.shards))
	for i, s := range c.shards {
		p[i] = s.path
	}
	return p
}

// Metadata maps each shard's base name to its __metadata__ object (shards
// without one are absent from the map).
func (c *Checkpoint) Metadata() map[string]map[string]string {
	m := make(map[string]map[string]string)
	for _, s := range c.shards {
		if s.meta != nil {
			m[s.base] = s.meta
		}
	}
	return m
}

// HasIndex reports whether the checkpoint was opened through an index file.
func (c *Checkpoint) HasIndex() bool { return c.hasIndex }

// shardOf checks that t was produced by this checkpoint and returns its
// shard.
func (c *Checkpoint) shardOf(t *Tensor) (*shard, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if t == nil || t.shard < 0 || int(t.shard) >= len(c.shards) {
		return nil, ErrForeignTensor
	}
	s := c.shards[t.shard]
	if s.path != t.File || t.Offset < s.dataOffset || t.Size < 0 || t.Offset > s.size-t.Size {
		return nil, newErr(t.File, t.Name, -1, ErrForeignTensor, "")
	}
	return s, nil
}

// Close releases files and mappings. Views from Bytes become invalid.
func (c *Checkpoint) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	var first error
	for _, s := range c.shards {
		if s == nil {
			continue
		}
		if err := s.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *shard) close() error {
	var first error
	if s.mapped != nil {
		first = unmap(s.mapped)
		s.mapped = nil
	}
	if s.direct != nil {
		if err := s.direct.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := s.f.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
