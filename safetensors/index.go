package safetensors

import (
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// MaxIndexSize bounds model.safetensors.index.json (§7.4).
const MaxIndexSize = 256 << 20

// index is a parsed model.safetensors.index.json. Its names alias the
// file's bytes, which are released once the index has been verified.
type index struct {
	path      string
	totalSize int64
	hasTotal  bool
	shards    []string // distinct shard file names, in first-seen order
	names              // the weight_map keys, pointer-free (see parsed)
	keys      []span
	hashes    []uint64
	shardOf   []uint16
	pos       []int32 // byte offset of each key, for errors
	seed      maphash.Seed
}

// openIndexed parses the index and, on the same worker pool, every
// *.safetensors file of the directory: on a checkpoint the size of K3 the index is as
// large as a third of the headers, and parsing it first would leave the
// other cores idle. Files the index does not name are then closed unused
// (never indexed; their errors are irrelevant) and reported as strays;
// named shards that the listing missed are opened afterwards.
func (c *Checkpoint) openIndexed(dir, idxPath string) error {
	var x *index
	var xerr error
	parseIndex := func() { x, xerr = readIndex(idxPath, c.seed) }
	listed, lerr := listShards(dir)
	var shards []*shard
	var errs []error
	if lerr == nil {
		paths := make([]string, len(listed))
		for i, n := range listed {
			paths[i] = filepath.Join(dir, n)
		}
		shards, errs = c.parseShards(paths, parseIndex)
	} else {
		parseIndex()
	}
	byName := make(map[string]int, len(listed))
	for i, n := range listed {
		byName[n] = i
	}
	// Whatever happens next, shards not kept must be closed.
	keep := make([]bool, len(shards))
	defer func() {
		for i, s := range shards {
			if s != nil && !keep[i] {
				s.close()
			}
		}
	}()
	if xerr != nil {
		return xerr
	}
	if lerr != nil {
		return lerr
	}
	c.hasIndex = true
	named := slices.Clone(x.shards)
	slices.Sort(named)
	isNamed := make(map[string]bool, len(named))
	for _, name := range named {
		isNamed[name] = true
		if i, ok := byName[name]; ok {
			if errs[i] != nil {
				return errs[i]
			}
			keep[i] = true
			c.shards = append(c.shards, shards[i])
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			detail := "shard " + strconv.Quote(name)
			if err != nil {
				detail += ": " + err.Error()
			} else {
				detail += " is a directory"
			}
			e := newErr(idxPath, "", -1, ErrIndexShardMissing, detail)
			if !c.opts.lenient {
				return e
			}
			c.warn(e.Error())
			continue
		}
		s, err := c.openShard(p)
		if err != nil {
			return err
		}
		c.shards = append(c.shards, s)
	}
	for _, n := range listed {
		if !isNamed[n] {
			c.warn("safetensors: ignoring " + filepath.Join(dir, n) + ": not named by " + IndexFileName)
		}
	}
	if err := c.merge(); err != nil {
		return err
	}
	// Errors may quote names that alias the index bytes; copying them lets
	// the bytes go when Open returns.
	return detach(c.verifyIndex(x))
}

// detach copies the strings of an *Error that may alias the index bytes, so
// a kept error does not keep the whole file alive.
func detach(err error) error {
	if e, ok := err.(*Error); ok {
		e.Tensor = strings.Clone(e.Tensor)
		e.Detail = strings.Clone(e.Detail)
	}
	return err
}

// verifyIndex checks that the index and the shards describe the same
// tensors, each in the shard the index names, and the total size. The
// common case (everything agrees) is checked in parallel; any disagreement
// is then reported by a serial pass, so the error is deterministic.
func (c *Checkpoint) verifyIndex(x *index) error {
	shardID := make(map[string]int32, len(c.shards))
	for i, s := range c.shards {
		shardID[s.base] = int32(i)
	}
	want := make([]int32, len(x.shards)) // index shard -> open shard, or -1
	for i, s := range x.shards {
		if id, ok := shardID[s]; ok {
			want[i] = id
		} else {
			want[i] = -1
		}
	}
	var sum int64
	for i := range c.all {
		t := &c.all[i]
		if sum > maxInt64-t.Size {
			return newErr(x.path, "", -1, ErrNumelOverflow, "sum of tensor sizes overflows")
		}
		sum += t.Size
	}
	if !c.opts.lenient && len(x.keys) == len(c.all) {
		seen := make([]uint32, len(c.all))
		ok := parallel(len(x.keys), c.opts.workers, func(lo, hi int) bool {
			for i := lo; i < hi; i++ {
				name := x.at(x.keys[i])
				id, ok := c.byName.find(x.hashes[i], func(k int32) bool { return c.all[k].Name == name })
				if !ok || c.all[id].shard != want[x.shardOf[i]] || !atomic.CompareAndSwapUint32(&seen[id], 0, 1) {
					return false
				}
			}
			return true
		})
		// All listed names found, distinct, and as many as the tensors:
		// so every tensor is listed.
		if ok {
			return c.checkTotal(x, sum)
		}
	}
	seen := make([]bool, len(c.all))
	for i := range x.keys {
		name := x.at(x.keys[i])
		id, ok := c.byName.find(x.hashes[i], func(k int32) bool { return c.all[k].Name == name })
		s := x.shards[x.shardOf[i]]
		if !ok {
			if _, dup := c.expected[name]; dup {
				return newErr(x.path, name, int64(x.pos[i]), ErrDuplicateKey, "weight_map lists it twice")
			}
			e := newErr(x.path, name, int64(x.pos[i]), ErrIndexTensorMissing, "index names shard "+strconv.Quote(s))
			if !c.opts.lenient {
				return e
			}
			if c.expected == nil {
				c.expected = map[string]string{}
			}
			c.expected[strings.Clone(name)] = s
			if want[x.shardOf[i]] >= 0 {
				c.warn(e.Error()) // an absent shard was already reported
			}
			continue
		}
		t := &c.all[id]
		if seen[id] {
			return newErr(x.path, name, int64(x.pos[i]), ErrDuplicateKey, "weight_map lists it twice")
		}
		seen[id] = true
		if t.shard != want[x.shardOf[i]] {
			return newErr(x.path, name, int64(x.pos[i]), ErrIndexWrongShard,
				"index names "+strconv.Quote(s)+", found in "+t.File)
		}
	}
	for id := range c.all {
		if t := &c.all[id]; !seen[id] {
			return newErr(t.File, t.Name, -1, ErrIndexUnlisted, "not in "+x.path)
		}
	}
	if len(c.expected) > 0 {
		return nil // total_size describes the complete checkpoint
	}
	return c.checkTotal(x, sum)
}

func (c *Checkpoint) checkTotal(x *index, sum int64) error {
	if x.hasTotal && sum != x.totalSize {
		return newErr(x.path, "", -1, ErrIndexTotalSize,
			"total_size "+strconv.FormatInt(x.totalSize, 10)+", tensors sum to "+strconv.FormatInt(sum, 10))
	}
	return nil
}

// readIndex reads the index file into memory and parses it. It is read, not
// mapped: the parser's views would otherwise point into a mapping that a
// concurrent truncation turns into SIGBUS anywhere verification touches a
// name, and a mapped page costs as much resident memory as a read one. The
// bytes (about 60 MB for K3) are dropped once the shards are verified.
func readIndex(path string, seed maphash.Seed) (*index, error) {
	ff, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	f := ff.(*os.File)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxIndexSize {
		return nil, newErr(path, "", -1, ErrIndexTooLarge, strconv.FormatInt(st.Size(), 10)+" bytes")
	}
	b := make([]byte, st.Size())
	if err := readFull(f, b, 0); err != nil {
		return nil, withFile(err, path)
	}
	if now, err := f.Stat(); err != nil {
		return nil, err
	} else if now.Size() != st.Size() {
		return nil, newErr(path, "", -1, ErrShortRead,
			"index changed size while being read ("+strconv.FormatInt(st.Size(), 10)+" → "+strconv.FormatInt(now.Size(), 10)+" bytes)")
	}
	return parseIndex(path, b, seed)
}

// ParseIndex validates the bytes of a model.safetensors.index.json and
// returns its weight map (tensor name -> shard file name) and total_size
// (-1 when absent). Open uses an allocation-light form of the same parser.
func ParseIndex(data []byte) (weightMap map[string]string, totalSize int64, err error) {
	x, err := parseIndex("", data, maphash.MakeSeed())
	if err != nil {
		return nil, 0, err
	}
	weightMap = make(map[string]string, len(x.keys))
	for i := range x.keys {
		n := x.at(x.keys[i])
		if _, dup := weightMap[n]; dup {
			return nil, 0, newErr("", n, int64(x.pos[i]), ErrDuplicateKey, "weight_map lists it twice")
		}
		weightMap[strings.Clone(n)] = x.shards[x.shardOf[i]]
	}
	totalSize = -1
	if x.hasTotal {
		totalSize = x.totalSize
	}
	return weightMap, totalSize, nil
}

func parseIndex(path string, b []byte, seed maphash.Seed) (*index, error) {
	x := &index{path: path, seed: seed}
	sc := newScanner(path, b)
	if !sc.open() {
		return nil, sc.err
	}
	sawMeta, sawMap := false, false
	sc.ws()
	if sc.peek() == '}' {
		sc.i++
	} else {
		for {
			sc.ws()
			pos := sc.i
			key, ok := sc.str("")
			if !ok || !sc.expect(':', "") {
				return nil, sc.err
			}
			sc.ws()
			dup := false
			switch key {
			case "metadata":
				dup, sawMeta = sawMeta, true
				ok = !dup && x.parseMeta(sc)
			case "weight_map":
				dup, sawMap = sawMap, true
				ok = !dup && x.parseWeightMap(sc)
			default:
				ok = sc.skipValue(0)
			}
			if dup {
				sc.i = pos
				sc.fail("", ErrDuplicateKey, strconv.Quote(key))
			}
			if !ok {
				return nil, sc.err
			}
			more, ok := sc.next("")
			if !ok {
				return nil, sc.err
			}
			if !more {
				break
			}
		}
	}
	if !sc.endJSON() {
		return nil, sc.err
	}
	if !sawMap {
		return nil, newErr(path, "", -1, ErrIndexFormat, "no weight_map")
	}
	return x, nil
}

// endJSON allows any JSON white space after an index file's object (a
// trailing newline is usual there, unlike in a safetensors header).
func (sc *scanner) endJSON() bool {
	sc.ws()
	if sc.i != len(sc.b) {
		sc.fail("", ErrTrailingGarbage, "found "+sc.found())
		return false
	}
	return true
}

func (x *index) parseMeta(sc *scanner) bool {
	if sc.peek() != '{' {
		sc.fail("", ErrIndexFormat, "metadata is not an object")
		return false
	}
	sc.i++
	sc.ws()
	if sc.peek() == '}' {
		sc.i++
		return true
	}
	seen := map[string]bool{}
	for {
		sc.ws()
		pos := sc.i
		key, ok := sc.str("")
		if !ok || !sc.expect(':', "") {
			return false
		}
		if seen[key] {
			sc.i = pos
			sc.fail("", ErrDuplicateKey, "metadata."+strconv.Quote(key))
			return false
		}
		seen[key] = true
		if key == "total_size" {
			v, ok := sc.uint("", ErrIndexFormat)
			if !ok {
				return false
			}
			x.totalSize, x.hasTotal = v, true
		} else if !sc.skipValue(1) {
			return false
		}
		more, ok := sc.next("")
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

func (x *index) parseWeightMap(sc *scanner) bool {
	if sc.peek() != '{' {
		sc.fail("", ErrIndexFormat, "weight_map is not an object")
		return false
	}
	sc.i++
	sc.ws()
	if sc.peek() == '}' {
		sc.i++
		return true
	}
	est := len(sc.b) / 128
	x.hs = sc.s
	x.keys = make([]span, 0, est)
	x.hashes = make([]uint64, 0, est)
	x.shardOf = make([]uint16, 0, est)
	x.pos = make([]int32, 0, est)
	last := -1
	for {
		sc.ws()
		pos := sc.i
		name, ok := sc.str("")
		if !ok || !sc.expect(':', name) {
			return false
		}
		escaped := sc.lastEscaped
		sc.ws()
		if sc.peek() != '"' {
			sc.fail(name, ErrIndexFormat, "weight_map value is not a string")
			return false
		}
		vpos := sc.i
		shard, ok := sc.str(name)
		if !ok {
			return false
		}
		// Consecutive entries nearly always name the same shard.
		if last < 0 || x.shards[last] != shard {
			last = -1
			for k, s := range x.shards {
				if s == shard {
					last = k
					break
				}
			}
			if last < 0 {
				if !plainName(shard) {
					sc.i = vpos
					sc.fail(name, ErrIndexShardName, strconv.Quote(shard))
					return false
				}
				if len(x.shards) == 1<<16 {
					sc.fail(name, ErrIndexFormat, "more than 65536 shards")
					return false
				}
				x.shards = append(x.shards, strings.Clone(shard))
				last = len(x.shards) - 1
			}
		}
		if name == "" {
			sc.i = pos
			sc.fail("", ErrEmptyName, "")
			return false
		}
		k := span{int32(pos + 1), int32(len(name))}
		if escaped {
			x.escaped = append(x.escaped, name)
			k.off = -int32(len(x.escaped))
		}
		x.keys = append(x.keys, k)
		x.hashes = append(x.hashes, maphash.String(x.seed, name))
		x.shardOf = append(x.shardOf, uint16(last))
		x.pos = append(x.pos, int32(pos))
		more, ok := sc.next(name)
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// plainName reports whether s names a file in the checkpoint directory
// itself: no separator, not "." or "..", no NUL.
func plainName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/\\\x00") && filepath.Base(s) == s
}
