package trunk

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// Options configure Open.
type Options struct {
	// Open opens weight files (default storage.Open). Files that are an *os.File are read with
	// O_DIRECT where the file system allows it, others through their ReadAt.
	Open storage.Opener
	// NoHugePages leaves MADV_HUGEPAGE off the pinned and ring arenas.
	NoHugePages bool
	// Readers is the number of concurrent reads one slot fill is split into (default 4).
	Readers int
	// ChunkBytes is the size of each of those reads (default 8 MiB; a multiple of 4096).
	ChunkBytes int64
	// Verify lists packed layers whose run is checked against its sha256 on first load.
	Verify []Checksum
	// NoRecheck skips comparing every streamed piece's bytes with its first read (§8.6).
	NoRecheck bool
	// Runner, when set, runs the row splits of streamed and pinned matrices (quant.MatVecOn);
	// nil starts goroutines per call.
	Runner quant.Runner
	// OnRead, when set, is called after every completed read of weights with the item (layer,
	// Head or Embed), the file offset and length and the time the read took.
	OnRead func(item int, off, n int64, d time.Duration)
}

// Checksum is the sha256 of one packed layer's unpadded run (§8.2).
type Checksum struct {
	Item   int
	File   string
	Offset int64
	Len    int64
	Sum    [sha256.Size]byte
}

// Stats are the store's counters since Open.
type Stats struct {
	Mode          string  `json:"mode"` // "direct" or "buffered": how streamed bytes were read
	Acquires      int64   `json:"acquires"`
	Hits          int64   `json:"hits"`           // pieces found resident in a ring slot
	Misses        int64   `json:"misses"`         // pieces read on demand (compute waited for the whole read)
	Prefetches    int64   `json:"prefetch_reads"` // pieces read ahead by the background reader
	PrefetchUsed  int64   `json:"prefetch_used"`
	Reads         int64   `json:"reads"` // device reads issued
	BytesRead     int64   `json:"bytes_read"`
	HeadBytes     int64   `json:"lm_head_bytes_read"`
	EmbedBytes    int64   `json:"embedding_bytes_read"`
	PinnedBytes   int64   `json:"pinned_bytes_loaded"`
	DeviceSeconds float64 `json:"device_seconds"` // time spent in reads of streamed pieces
	WaitSeconds   float64 `json:"wait_seconds"`   // time compute waited for them
	OutOfOrder    int64   `json:"out_of_order"`   // acquisitions that did not follow the walk
	Verified      int     `json:"layers_verified"`
	VerifySeconds float64 `json:"verify_seconds"` // first-load sha256 checks (not counted as wait)
	VerifyBytes   int64   `json:"verify_bytes"`
	// VerifyWaitSeconds is time compute waited for a read-ahead fill that was checking its
	// layer's checksum (first load only); it is not in WaitSeconds.
	VerifyWaitSeconds float64 `json:"verify_wait_seconds"`
	// RecheckBytes and RecheckSeconds: streamed bytes compared with their first read (CRC-32C of
	// a 4 KiB page in every 64 KiB, every fill, §8.6) and the time that took.
	RecheckBytes   int64   `json:"recheck_bytes"`
	RecheckSeconds float64 `json:"recheck_seconds"`
}

// Overlap returns the share of streaming device time hidden behind compute.
func (s Stats) Overlap() float64 {
	if s.DeviceSeconds <= 0 {
		return 0
	}
	return math.Max(0, math.Min(1, 1-s.WaitSeconds/s.DeviceSeconds))
}

// TotalBytes is every byte the store read: streamed pieces, lm_head and
// embedding rows.
func (s Stats) TotalBytes() int64 { return s.BytesRead + s.HeadBytes + s.EmbedBytes }

// StreamMBs is the rate of the streamed pieces and the head in decimal MB a
// second of device time, 0 before any was read.
func (s Stats) StreamMBs() float64 {
	if s.DeviceSeconds <= 0 {
		return 0
	}
	return float64(s.BytesRead+s.HeadBytes) / 1e6 / s.DeviceSeconds
}

type slotState uint8

const (
	slotEmpty slotState = iota
	slotFilling
	slotReady
)

// slot is one ring buffer. A slot being filled is never handed out, and a slot with holds > 0 is
// never refilled: both are checked under Store.mu, which is the only way to claim a slot.
type slot struct {
	buf      []byte
	piece    int // −1 when empty
	state    slotState
	holds    int
	mat      quant.Matrix // view of the payload, built once per fill
	prefetch bool         // filled by read-ahead and not yet used
	// wide: in a split ring (Plan.Split) slot 0 holds, or last failed to read, a wide piece
	// over the whole ring, so the other slot is covered (Store.covered) until slot 0 is refilled.
	wide bool
}

// piece is a row range of one tensor, streamed through one slot.
type piece struct {
	wide   bool // larger than a slot of a split ring: it takes the whole ring
	t      *Tensor
	f      *openFile
	r0, r1 int
	off, n int64
	ctor   func(int, int, []byte) (quant.Matrix, error)
	sum    uint32 // CRC-32C of the first read (recheck)
	summed bool
}

type openFile struct {
	path string
	f    storage.File
	r    *storage.Reader // aligned reads of f
	size int64           // at open: it bounds every read, so a file that shrinks gives a short read, never zeros
}

// Store serves the dense weights of a plan. Pinned tensors are loaded at Open; streamed tensors
// are read piece by piece through the ring as the layer math asks for them. Matrices of one
// Store must be used by one forward pass at a time (the walk is a single sequence); they may be
// used by many goroutines inside it.
type Store struct {
	plan  *Plan
	opts  Options
	files map[string]*openFile

	pinned *arena
	ring   *arena
	mats   map[string]quant.Matrix
	embed  quant.Matrix
	rows   *rowReader // the streamed embedding, if any

	pieces []piece
	items  map[int]*itemState

	mu    sync.Mutex
	cond  *sync.Cond
	slots []slot
	walk  int
	wake  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
	close bool

	err      atomic.Pointer[error]
	stats    Stats
	verifyMu sync.Mutex    // serialises first-load verification; never held with mu
	mode     atomic.Uint32 // 1 once any streamed read fell back to buffered
	rechecks rechecks
}

type itemState struct {
	verify       *Checksum
	verified     bool // guarded by Store.verifyMu
	verifiedFlag atomic.Bool
	bad          error
}

// Open allocates the plan's arenas, loads and verifies the pinned tensors and starts the ring.
// tensors must be the ones the plan was made from.
func Open(p *Plan, tensors []Tensor, o Options) (*Store, error) {
	if o.Open == nil {
		o.Open = storage.Open
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 8 << 20
	}
	if o.ChunkBytes%storage.Alignment != 0 {
		return nil, fmt.Errorf("trunk: chunk of %d bytes is not a multiple of %d", o.ChunkBytes, storage.Alignment)
	}
	s := &Store{plan: p, opts: o, files: map[string]*openFile{}, mats: map[string]quant.Matrix{},
		items: map[int]*itemState{}, walk: -1, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	for i := range o.Verify {
		c := &o.Verify[i]
		s.item(c.Item).verify = c
	}
	if err := s.open(tensors); err != nil {
		s.Close()
		return nil, err
	}
	if len(s.slots) >= 2 {
		s.wg.Add(1)
		go s.readAhead()
	}
	return s, nil
}

func (s *Store) item(id int) *itemState {
	st := s.items[id]
	if st == nil {
		st = &itemState{}
		s.items[id] = st
	}
	return st
}

func (s *Store) file(path string) (*openFile, error) {
	if f := s.files[path]; f != nil {
		return f, nil
	}
	f, err := s.opts.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trunk: open %s: %w", path, err)
	}
	size, err := storage.Size(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trunk: open %s: %w", path, err)
	}
	of := &openFile{path: path, f: f, r: storage.NewReader(f, path), size: size}
	s.files[path] = of
	return of, nil
}

func (s *Store) open(tensors []Tensor) error {
	p := s.plan
	huge := !s.opts.NoHugePages
	var err error
	if s.pinned, err = newArena(p.PinnedBytes+p.EmbedBytes, huge); err != nil {
		return err
	}
	if s.ring, err = newArena(p.RingBytes, huge); err != nil {
		return err
	}
	for i := range p.Slots {
		b := s.ring.buf[int64(i)*p.SlotBytes : int64(i+1)*p.SlotBytes : int64(i+1)*p.SlotBytes]
		s.slots = append(s.slots, slot{buf: b, piece: -1})
	}
	// Pinned tensors go into the arena in the caller's order, each at an aligned position with
	// room for its read window; the ring walk is layers ascending, then the head, each layer's
	// tensors in the caller's order (the order the layer math first uses them).
	var at int64
	walk := slices.Clone(tensors)
	slices.SortStableFunc(walk, func(a, b Tensor) int { return key(a.Item) - key(b.Item) })
	for i := range walk {
		t := &walk[i]
		if err := t.check(); err != nil {
			return err
		}
		f, err := s.file(t.File)
		if err != nil {
			return err
		}
		if t.Offset > f.size || t.Size > f.size-t.Offset {
			return &ReadError{Item: t.Item, Tensor: t.Name, File: t.File, Offset: t.Offset, Len: t.Size,
				Err: fmt.Errorf("%w: file has %d bytes", safetensors.ErrShortRead, f.size)}
		}
		ctor, _ := t.ctor()
		switch {
		case t.Item == Embed && p.EmbedPinned, t.Item != Embed && p.pinnedItem(t.Item):
			n := pinnedBytes(t)
			m, err := s.loadPinned(t, f, ctor, s.pinned.buf[at:at+n:at+n])
			if err != nil {
				return err
			}
			at += n
			if t.Item == Embed {
				s.embed = m
			} else {
				s.mats[t.Name] = m
			}
		case t.Item == Embed:
			rr := &rowReader{s: s, t: t, f: f, ctor: ctor}
			if rr.buf, err = newArena(roundUp(t.rowBytes()+window, storage.Alignment), false); err != nil {
				return err
			}
			s.rows = rr
			s.embed = rr
		default:
			s.mats[t.Name] = s.addPieces(t, f, ctor)
		}
	}
	for id, st := range s.items {
		if st.verify != nil && p.pinnedItem(id) {
			if err := s.verifyItem(id, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadPinned reads t into dst (an aligned arena range sized by pinnedBytes).
func (s *Store) loadPinned(t *Tensor, f *openFile, ctor func(int, int, []byte) (quant.Matrix, error), dst []byte) (quant.Matrix, error) {
	data, err := s.read(t.Item, t.Name, f, dst, t.Offset, t.Size)
	if err != nil {
		return nil, err
	}
	s.stats.PinnedBytes += t.Size
	return ctor(t.Rows, t.Cols, data)
}

// addPieces splits t into row ranges that fit a slot and returns the streamed matrix over them.
func (s *Store) addPieces(t *Tensor, f *openFile, ctor func(int, int, []byte) (quant.Matrix, error)) *Matrix {
	rb := t.rowBytes()
	per := t.Rows
	if !t.Whole {
		per = int(max(1, min(int64(t.Rows), (s.plan.SlotBytes-window)/rb)))
	}
	m := &Matrix{s: s, t: t, rows: t.Rows, lo: 0, hi: t.Rows, first: len(s.pieces), per: per}
	for r0 := 0; r0 < t.Rows; r0 += per {
		r1 := min(t.Rows, r0+per)
		off, n := t.Offset+int64(r0)*rb, int64(r1-r0)*rb
		wide := s.plan.Split && storage.WindowLen(off, n) > s.plan.SlotBytes
		s.pieces = append(s.pieces, piece{t: t, f: f, r0: r0, r1: r1, off: off, n: n, ctor: ctor, wide: wide})
	}
	m.last = len(s.pieces)
	return m
}

// Matrix returns the matrix of the tensor called name (resident or streamed).
func (s *Store) Matrix(name string) (quant.Matrix, bool) {
	m, ok := s.mats[name]
	return m, ok
}

// Embedding returns the embedding table: resident, or a matrix whose DecodeRow reads the row
// from disk (it supports nothing else). Nil when the plan had no embedding tensor.
func (s *Store) Embedding() quant.Matrix { return s.embed }

// Plan returns the plan the store serves.
func (s *Store) Plan() *Plan { return s.plan }

// Err returns the first read failure since the last ClearErr. A matrix whose bytes could not be
// read leaves NaN in its output rows and records the error here, so the caller must check Err
// after every layer and discard what it computed.
func (s *Store) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// ClearErr forgets a recorded failure (at the start of a new forward pass).
func (s *Store) ClearErr() { s.err.Store(nil) }

func (s *Store) fail(err error) {
	s.err.CompareAndSwap(nil, &err)
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := s.stats
	s.mu.Unlock()
	st.RecheckBytes, st.RecheckSeconds = s.rechecks.bytes.Load(), time.Duration(s.rechecks.nanos.Load()).Seconds()
	st.Mode = "direct"
	if s.mode.Load() != 0 {
		st.Mode = "buffered"
	}
	return st
}

// Close stops the read-ahead goroutine, waits for reads in flight and frees the arenas. Matrices
// of a closed store must not be used.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.close {
		s.mu.Unlock()
		return nil
	}
	s.close = true
	close(s.done)
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	for s.anyFilling() {
		s.cond.Wait()
	}
	s.mu.Unlock()
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.r.Close(), f.f.Close())
	}
	errs = append(errs, s.pinned.free(), s.ring.free())
	if s.rows != nil {
		errs = append(errs, s.rows.buf.free())
	}
	return errors.Join(errs...)
}

func (s *Store) anyFilling() bool {
	for i := range s.slots {
		if s.slots[i].state == slotFilling {
			return true
		}
	}
	return false
}

// acquire returns the matrix view of piece pc and the slot holding it; release(slot) must follow.
func (s *Store) acquire(pc int) (quant.Matrix, int, error) {
	if err := s.Err(); err != nil {
		return nil, -1, err // fail fast: the pass is lost already
	}
	m, i, woke, err := s.acquireLocked(pc)
	if woke {
		// The reader was made runnable on this goroutine's P, where it would wait until the
		// kernel about to run blocks; yielding lets it issue the next read now, so the read
		// overlaps this piece's compute instead of following it.
		runtime.Gosched()
	}
	return m, i, err
}

func (s *Store) acquireLocked(pc int) (_ quant.Matrix, _ int, woke bool, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Acquires++
	if s.walk >= 0 && pc != s.walk && pc != s.next(s.walk) && pc != 0 {
		s.stats.OutOfOrder++
	}
	var waited time.Duration
	defer func() { s.stats.WaitSeconds += waited.Seconds() }()
	for {
		if s.close {
			return nil, -1, woke, ErrClosed
		}
		if i := s.find(pc); i >= 0 {
			sl := &s.slots[i]
			if sl.state == slotReady {
				sl.holds++
				if sl.prefetch {
					sl.prefetch = false
					s.stats.PrefetchUsed++
				}
				if waited == 0 {
					s.stats.Hits++
				}
				woke = s.setWalk(pc)
				return sl.mat, i, woke, nil
			}
			t0 := time.Now()
			verifying := s.unverified(s.pieces[pc].t.Item)
			s.cond.Wait() // being filled by read-ahead
			if verifying {
				// The fill includes the item's first-load checksum pass: that is verification
				// time, not streaming the compute waited for.
				s.stats.VerifyWaitSeconds += time.Since(t0).Seconds()
			} else {
				waited += time.Since(t0)
			}
			continue
		}
		i := s.victim(pc)
		if i < 0 {
			if s.anyFilling() {
				t0 := time.Now()
				s.cond.Wait()
				waited += time.Since(t0)
				continue
			}
			return nil, -1, woke, fmt.Errorf("%w: %d slots, piece %d of %s", ErrRingExhausted, len(s.slots), pc, s.pieces[pc].t.Name)
		}
		s.stats.Misses++
		woke = s.setWalk(pc)
		t0 := time.Now()
		v, err := s.fill(i, pc, false)
		waited += time.Since(t0) - v
		if err != nil {
			return nil, -1, woke, err
		}
		s.slots[i].holds++
		return s.slots[i].mat, i, woke, nil
	}
}

func (s *Store) release(i int) {
	s.mu.Lock()
	s.slots[i].holds--
	if s.slots[i].holds < 0 {
		s.mu.Unlock()
		panic("trunk: slot released more often than acquired")
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// covered reports whether slot i lies under a wide piece in slot 0 (§8.6), where no fill may go.
func (s *Store) covered(i int) bool { return i != 0 && s.slots[0].wide }

func (s *Store) next(pc int) int { return (pc + 1) % len(s.pieces) }

// setWalk records pc as the piece in use and reports whether it woke the reader.
func (s *Store) setWalk(pc int) bool {
	if s.walk != pc {
		s.walk = pc
		if len(s.slots) >= 2 {
			select {
			case s.wake <- struct{}{}:
				return true
			default:
			}
		}
	}
	return false
}

func (s *Store) find(pc int) int {
	for i := range s.slots {
		if s.slots[i].piece == pc && s.slots[i].state != slotEmpty {
			return i
		}
	}
	return -1
}

// protected reports whether piece q lies in the window [from, from+len(slots)−1] (modulo the
// walk): the piece being used and the ones read ahead for it, which no fill may overwrite.
func (s *Store) protected(q, from int) bool {
	n := len(s.pieces)
	d := (q - from + n) % n
	return d < len(s.slots)
}

// victim picks a slot to fill with piece pc on demand: an empty one, else one holding a piece
// outside the protected window from pc, else the one holding the farthest upcoming piece. Leased
// and filling slots are never candidates.
func (s *Store) victim(pc int) int {
	if s.pieces[pc].wide {
		// The whole ring, so every slot must be free; slot 0 takes it.
		for i := range s.slots {
			if s.slots[i].state == slotFilling || s.slots[i].holds > 0 {
				return -1
			}
		}
		return 0
	}
	best, bestD := -1, -1
	n := len(s.pieces)
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.state == slotFilling || sl.holds > 0 || s.covered(i) {
			continue
		}
		if sl.state == slotEmpty {
			return i
		}
		d := (sl.piece - pc + n) % n
		if !s.protected(sl.piece, pc) {
			d = n // consumed: the best victim
		}
		if d > bestD {
			best, bestD = i, d
		}
	}
	return best
}

// fill reads piece pc into slot i. It is called and returns with s.mu held, and releases it
// during the read; the slot is INFLIGHT meanwhile, so no one else can claim or serve it.
// It returns the time spent verifying the piece's packed layer on first load.
func (s *Store) fill(i, pc int, ahead bool) (time.Duration, error) {
	sl := &s.slots[i]
	p := &s.pieces[pc]
	buf := sl.buf
	if p.wide {
		// Slot 0 takes the whole ring: whatever the others held goes (the caller has checked
		// that none is in use or filling), and they stay covered until slot 0 is refilled.
		for k := 1; k < len(s.slots); k++ {
			s.slots[k].piece, s.slots[k].state, s.slots[k].mat, s.slots[k].prefetch = -1, slotEmpty, nil, false
		}
		buf = s.ring.buf[:s.plan.RingBytes:s.plan.RingBytes]
	}
	sl.wide = p.wide
	sl.piece, sl.state, sl.mat, sl.prefetch = pc, slotFilling, nil, false
	s.mu.Unlock()
	m, d, v, err := s.fillPiece(buf, p)
	s.mu.Lock()
	s.stats.DeviceSeconds += d.Seconds()
	if err != nil {
		sl.piece, sl.state = -1, slotEmpty
		s.cond.Broadcast()
		return v, err
	}
	if p.t.Item == Head {
		s.stats.HeadBytes += p.n
	} else {
		s.stats.BytesRead += p.n
	}
	if ahead {
		s.stats.Prefetches++
	}
	sl.state, sl.mat, sl.prefetch = slotReady, m, ahead
	s.cond.Broadcast()
	return v, nil
}

func (s *Store) fillPiece(buf []byte, p *piece) (quant.Matrix, time.Duration, time.Duration, error) {
	st := s.itemFor(p.t.Item)
	t0 := time.Now()
	if err := s.ensureVerified(p.t.Item, st); err != nil {
		return nil, 0, time.Since(t0), err
	}
	v := time.Since(t0)
	t0 = time.Now()
	data, err := s.read(p.t.Item, p.label(), p.f, buf, p.off, p.n)
	d := time.Since(t0)
	if err != nil {
		return nil, d, v, err
	}
	if err := s.recheck(p.t.Item, p, data); err != nil {
		return nil, d, v, err
	}
	m, err := p.ctor(p.r1-p.r0, p.t.Cols, data)
	return m, d, v, err
}

func (p *piece) label() string {
	if p.r0 == 0 && p.r1 == p.t.Rows {
		return p.t.Name
	}
	return fmt.Sprintf("%s rows [%d, %d)", p.t.Name, p.r0, p.r1)
}

// unverified reports whether item still has a first-load checksum to pass. It reads the flag
// without verifyMu: a stale answer only misfiles one wait between two counters.
func (s *Store) unverified(item int) bool {
	st := s.items[item]
	return st != nil && st.verify != nil && !st.verifiedFlag.Load()
}

// itemFor returns the item's verification state; items is only written during Open.
func (s *Store) itemFor(id int) *itemState { return s.items[id] }

func (s *Store) ensureVerified(id int, st *itemState) error {
	if st == nil || st.verify == nil {
		return nil
	}
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if st.verified {
		return nil
	}
	if st.bad != nil {
		return st.bad
	}
	return s.verifyItem(id, st)
}

// verifyItem hashes an item's packed run in chunks and compares it with trunk.json's digest.
func (s *Store) verifyItem(id int, st *itemState) error {
	c := st.verify
	f, err := s.file(c.File)
	if err != nil {
		return err
	}
	buf, err := newArena(s.opts.ChunkBytes+window, false)
	if err != nil {
		return err
	}
	defer buf.free()
	t0 := time.Now()
	h := sha256.New()
	for off := c.Offset; off < c.Offset+c.Len; off += s.opts.ChunkBytes {
		n := min(s.opts.ChunkBytes, c.Offset+c.Len-off)
		b, err := s.read(id, "checksum", f, buf.buf, off, n)
		if err != nil {
			return err
		}
		h.Write(b)
	}
	if got := h.Sum(nil); !bytes.Equal(got, c.Sum[:]) {
		st.bad = fmt.Errorf("%w: %s of %s: sha256 %x, trunk.json says %x", ErrChecksum, itemName(id), c.File, got, c.Sum)
		return st.bad
	}
	st.verified = true
	st.verifiedFlag.Store(true)
	s.mu.Lock()
	s.stats.VerifySeconds += time.Since(t0).Seconds()
	s.stats.Verified++
	s.stats.VerifyBytes += c.Len
	s.mu.Unlock()
	return nil
}

// read reads [off, off+n) of f into buf (aligned, with room for the window) with up to
// opts.Readers concurrent reads of opts.ChunkBytes, and returns the payload.
func (s *Store) read(item int, label string, f *openFile, buf []byte, off, n int64) ([]byte, error) {
	fail := func(at, k int64, err error) error {
		return &ReadError{Item: item, Tensor: label, File: f.path, Offset: at, Len: k, Err: err}
	}
	if off < 0 || n < 0 || off > f.size || n > f.size-off {
		return nil, fail(off, n, fmt.Errorf("%w: the file has %d bytes", safetensors.ErrShortRead, f.size))
	}
	lo, _, pad := storage.Window(off, n)
	end := off + n
	if int64(len(buf)) < storage.WindowLen(off, n) {
		return nil, fail(off, n, fmt.Errorf("trunk: buffer of %d bytes for a %d-byte window", len(buf), storage.WindowLen(off, n)))
	}
	chunks := int((end - lo + s.opts.ChunkBytes - 1) / s.opts.ChunkBytes)
	errs := make([]error, chunks)
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Readers)
	t0 := time.Now()
	for c := range chunks {
		at := lo + int64(c)*s.opts.ChunkBytes
		k := min(s.opts.ChunkBytes, end-at)
		dst := buf[at-lo:]
		one := func() {
			p, err := f.r.ReadAligned(dst, at, k)
			switch {
			case err != nil:
				errs[c] = fail(at, k, err)
			case int64(len(p)) != k || (len(p) > 0 && &p[0] != &dst[0]):
				errs[c] = fail(at, k, fmt.Errorf("%w: %d of %d bytes, or not in place", safetensors.ErrShortRead, len(p), k))
			}
			if f.r.Mode() == storage.ModeBuffered {
				s.mode.Store(1)
			}
		}
		if chunks == 1 {
			one()
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			one()
			<-sem
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stats.Reads += int64(chunks)
	s.mu.Unlock()
	if s.opts.OnRead != nil {
		s.opts.OnRead(item, off, n, time.Since(t0))
	}
	return buf[pad : pad+n : pad+n], nil
}

// readAhead fills the pieces after the walk's current one into slots holding consumed pieces,
// never into a leased, filling or protected slot. It runs only with two or more slots: with one,
// the only slot is always the one in use (§8.6).
func (s *Store) readAhead() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		for !s.close && s.Err() == nil {
			pc, i := s.aheadTarget()
			if i < 0 {
				break
			}
			if _, err := s.fill(i, pc, true); err != nil {
				// The demand read of the same piece will fail and report it; read-ahead never
				// surfaces errors on its own.
				break
			}
		}
		s.mu.Unlock()
	}
}

// aheadTarget returns the next piece of the window that is not resident and a slot it may
// overwrite, or −1.
func (s *Store) aheadTarget() (int, int) {
	if s.walk < 0 {
		return -1, -1
	}
	for d := 1; d < len(s.slots); d++ {
		pc := (s.walk + d) % len(s.pieces)
		if pc == s.walk {
			break // fewer pieces than slots
		}
		if s.find(pc) >= 0 {
			continue
		}
		if s.pieces[pc].wide {
			return -1, -1 // read on demand, once neither slot is in use
		}
		for i := range s.slots {
			sl := &s.slots[i]
			if sl.state == slotFilling || sl.holds > 0 || s.covered(i) {
				continue
			}
			if sl.state == slotEmpty || !s.protected(sl.piece, s.walk) {
				return pc, i
			}
		}
		return -1, -1
	}
	return -1, -1
}

// readRow reads one embedding row into buf (aligned, room for the window).
func (s *Store) readRow(t *Tensor, f *openFile, buf []byte, off, n int64) ([]byte, error) {
	b, err := s.read(Embed, t.Name, f, buf, off, n)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stats.EmbedBytes += n
	s.mu.Unlock()
	return b, nil
}
