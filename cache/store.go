package cache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

var (
	// ErrBudgetTooSmall refuses a budget that holds fewer than TopK + 1
	// slots (one token's working set plus one); the message names the
	// minimum. A budget of 0 is accepted: experts are then read for every
	// request into per-call scratch memory and nothing is retained.
	ErrBudgetTooSmall = errors.New("cache: budget below one token's working set")
	// ErrBatchTooLarge reports a call asking for more experts than
	// MaxBatch.
	ErrBatchTooLarge = errors.New("cache: more experts in one call than MaxBatch")
	// ErrClosed reports use of a closed Store.
	ErrClosed = errors.New("cache: store closed")
	// ErrLeased reports Close while experts are still leased; the arena
	// is then left mapped so the views stay valid.
	ErrLeased = errors.New("cache: experts still leased")
	// ErrUnknownLayer reports a layer the store was not configured for.
	ErrUnknownLayer = errors.New("cache: layer has no routed experts in this store")
	// ErrExpertID reports an expert id outside [0, NumExperts).
	ErrExpertID = errors.New("cache: expert id out of range")
)

// Config describes what a Store serves and how much memory it may use.
type Config struct {
	// Layers lists the MoE layers (zero-based, as in the tensor names).
	Layers []int
	// NumExperts is the routed experts per layer (NE); TopK the picks per
	// token (k).
	NumExperts, TopK int
	// Budget is the slot arena's size in bytes: ⌊Budget / SlotBytes⌋ slots,
	// at least TopK + 1, or 0 for no cache.
	Budget int64
	// Shapes, when set, are checked against every expert (always set it
	// when a model configuration is known).
	Shapes *Shapes
	// ScratchSlots, with Budget 0, is how many experts the read scratch
	// holds (1 to TopK; 0 means TopK). Fewer than TopK lowers the memory
	// floor by (TopK − ScratchSlots) slots: MaxBatch becomes ScratchSlots,
	// so the MoE fetches a layer's picks in waves (moe.BatchLimiter) with
	// bit-identical results, at the cost of reading a layer's experts in
	// ⌈TopK / ScratchSlots⌉ rounds instead of one (Plan.Waves; the measured
	// cost is in Plan's documentation). With a budget it must be 0.
	ScratchSlots int
}

// Slot states (§9.2).
const (
	stateEmpty uint8 = iota
	stateInflight
	stateResident
)

// Who filled a slot whose content has not been requested yet.
const (
	originDemand uint8 = iota
	originPrefetch
	originSpec
)

type slot struct {
	state  uint8
	origin uint8
	used   bool // a demand request has been served from this content
	key    int32
	leases int32
	owner  uint64 // the filling call while INFLIGHT
	since  uint64 // step in which the content was published
	expert moe.Expert
}

// Store is the routed-expert cache of §9: it locates every expert of
// the configured layers in a checkpoint, keeps up to ⌊Budget/SlotBytes⌋ of
// them in a slot arena under a replacement policy, reads the others with
// aligned (direct where possible) reads, and hands them out as MXFP4 views
// under leases. It implements moe.ExpertSource; its methods are safe for
// concurrent use.
type Store struct {
	cfg      Config
	opts     options
	layerIdx []int32 // layer → index into cfg.Layers, −1
	locs     []location
	files    []shardFile
	paths    []string

	expertBytes int64 // largest expert payload
	slotBytes   int64
	// scratchBytes is the largest coded expert's read span (0: none coded);
	// readers are the idle read goroutines' decoders and scratch buffers.
	scratchBytes int64
	rmu          sync.Mutex
	readers      []*reader
	nslots       int
	maxBatch     int
	speculate    bool
	arena        *arena

	mu      sync.Mutex
	cond    *sync.Cond
	closed  bool
	slots   []slot
	slotOf  []int32 // key → slot, −1
	free    []int32
	policy  Policy
	evictFn func(int) bool
	step    uint64
	steps   int64
	// bgInflight counts slots reserved by background reads not yet
	// published; bgDone counts background reads that finished.
	bgInflight int
	bgDone     uint64
	fillSeq    uint64
	run        counters
	cur        counters
	pred       [][]int // pending predictions per layer index
	last       [][]int // previous demand picks per layer index (speculation)
	// Budget 0: the read scratch of MaxBatch slots, mapped on first use,
	// whose free slots calls take one per expert, so that two calls of
	// MaxBatch/2 experts (the MoE's overlapped half-waves) share it and the
	// scratch the plan promises is all they use; scratch pools whole
	// arenas of MaxBatch slots for calls that find too few free slots
	// (callers holding more leases at once than the MoE does).
	scratchMem  *arena
	scratchFree []int32
	scratch     []*arena

	leases sync.Pool
	bg     sync.WaitGroup
}

// New opens a Store over the routed experts of ck. Every expert of every
// configured layer is located and checked up front (§9.1), so a
// missing or malformed tensor fails here with ErrExpertTensor. ck must stay
// open while the Store is used; the Store opens its own readers on the
// shard files.
func New(ck *safetensors.Checkpoint, cfg Config, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.NumExperts < 1 || cfg.TopK < 1 || cfg.TopK > cfg.NumExperts {
		return nil, fmt.Errorf("cache: NumExperts %d and TopK %d: want 1 ≤ TopK ≤ NumExperts", cfg.NumExperts, cfg.TopK)
	}
	if len(cfg.Layers) == 0 {
		return nil, errors.New("cache: no layers")
	}
	if cfg.Budget < 0 {
		return nil, fmt.Errorf("cache: negative budget %d", cfg.Budget)
	}
	if err := checkScratchSlots(cfg.ScratchSlots, cfg.TopK, cfg.Budget); err != nil {
		return nil, err
	}
	if _, err := NewPolicy(o.policy, 1); err != nil {
		return nil, err
	}
	maxLayer := slices.Max(cfg.Layers)
	if slices.Min(cfg.Layers) < 0 || maxLayer > 1<<20 {
		return nil, fmt.Errorf("cache: layer indices %v outside [0, 2^20]", cfg.Layers)
	}
	s := &Store{cfg: cfg, opts: o, layerIdx: make([]int32, maxLayer+1)}
	s.cfg.Layers = slices.Clone(cfg.Layers)
	for i := range s.layerIdx {
		s.layerIdx[i] = -1
	}
	for i, l := range cfg.Layers {
		if s.layerIdx[l] >= 0 {
			return nil, fmt.Errorf("cache: layer %d listed twice", l)
		}
		s.layerIdx[l] = int32(i)
	}
	if err := s.locateAll(ck); err != nil {
		return nil, err
	}
	for _, l := range s.locs {
		s.slotBytes = max(s.slotBytes, l.need())
		s.expertBytes = max(s.expertBytes, l.payloadBytes())
		if l.coded() {
			s.scratchBytes = max(s.scratchBytes, l.readSpan())
		}
	}
	if err := s.openFiles(); err != nil {
		return nil, err
	}
	s.nslots = int(cfg.Budget / s.slotBytes)
	if cfg.Budget > 0 && s.nslots < cfg.TopK+1 {
		s.closeFiles()
		min := int64(cfg.TopK+1) * s.slotBytes
		return nil, fmt.Errorf("%w: %d bytes hold %d slots of %d bytes; TopK + 1 = %d slots need at least %d bytes (or 0 for no cache)",
			ErrBudgetTooSmall, cfg.Budget, s.nslots, s.slotBytes, cfg.TopK+1, min)
	}
	s.maxBatch = cfg.TopK
	if cfg.ScratchSlots > 0 {
		s.maxBatch = cfg.ScratchSlots
	}
	if s.nslots > 0 {
		s.maxBatch = max(cfg.TopK, s.nslots/2)
		if o.maxBatch > 0 {
			s.maxBatch = min(max(o.maxBatch, cfg.TopK), s.nslots-1)
		}
		var err error
		if s.arena, err = newArena(int64(s.nslots)*s.slotBytes, !o.noHuge); err != nil {
			s.closeFiles()
			return nil, err
		}
		s.policy, _ = NewPolicy(o.policy, s.nslots)
		s.slots = make([]slot, s.nslots)
		s.free = make([]int32, s.nslots)
		for i := range s.free {
			s.free[i] = int32(s.nslots - 1 - i) // pop order 0, 1, 2, …
		}
		s.speculate = o.speculate && s.nslots >= 2*cfg.TopK+8
	}
	s.slotOf = make([]int32, len(s.locs))
	for i := range s.slotOf {
		s.slotOf[i] = -1
	}
	s.pred = make([][]int, len(cfg.Layers))
	s.last = make([][]int, len(cfg.Layers))
	s.cond = sync.NewCond(&s.mu)
	s.evictFn = func(sl int) bool {
		st := &s.slots[sl]
		return st.state == stateResident && st.leases == 0
	}
	s.leases.New = func() any {
		ls := &leaseSet{s: s}
		ls.fn = ls.release
		return ls
	}
	return s, nil
}

// locateAll resolves every (layer, expert), collecting up to 8 problems.
func (s *Store) locateAll(ck *safetensors.Checkpoint) error {
	stamps, err := quant.LoadStamps(ck.Metadata())
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	ne := s.cfg.NumExperts
	s.locs = make([]location, len(s.cfg.Layers)*ne)
	index := map[string]int32{}
	fileIndex := func(path string) int32 {
		i, ok := index[path]
		if !ok {
			i = int32(len(s.paths))
			index[path] = i
			s.paths = append(s.paths, path)
		}
		return i
	}
	var errs []error
	bad := 0
	for li, l := range s.cfg.Layers {
		for e := range ne {
			loc, err := locate(ck, stamps, l, e, s.cfg.Shapes, fileIndex)
			if err != nil {
				if bad++; bad <= 8 {
					errs = append(errs, fmt.Errorf("layer %d expert %d: %w", l, e, err))
				}
				continue
			}
			s.locs[li*ne+e] = loc
		}
	}
	if bad > 8 {
		errs = append(errs, fmt.Errorf("cache: and %d more bad experts", bad-8))
	}
	return errors.Join(errs...)
}

// shardFile is an opened shard and its aligned reader.
type shardFile struct {
	f storage.File
	r *storage.Reader
}

func (s *Store) openFiles() error {
	open := s.opts.opener
	if open == nil {
		open = storage.Open
	}
	for _, p := range s.paths {
		f, err := open(p)
		if err != nil {
			s.closeFiles()
			return fmt.Errorf("cache: opening %s: %w", p, err)
		}
		r := storage.NewBufferedReader(f)
		if !s.opts.noDirect {
			r = s.opts.aligned(f, p)
		}
		s.files = append(s.files, shardFile{f, r})
	}
	return nil
}

func (s *Store) closeFiles() error {
	var errs []error
	for _, sf := range s.files {
		errs = append(errs, sf.r.Close(), sf.f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// Slots is the number of cache slots (0 without a cache).
func (s *Store) Slots() int { return s.nslots }

// SlotBytes is the slot stride: align4096(expert bytes + 2·4096).
func (s *Store) SlotBytes() int64 { return s.slotBytes }

// ExpertBytes is the largest expert's payload.
func (s *Store) ExpertBytes() int64 { return s.expertBytes }

// MaxBatch is the most distinct experts one call may request; moe fetches a
// prefill chunk's union in waves of at most this many.
func (s *Store) MaxBatch() int { return s.maxBatch }

// Policy is the replacement policy's name.
func (s *Store) Policy() PolicyName { return s.opts.policy }

// MinBudget is the smallest non-zero budget a Store over experts of
// slotBytes accepts for topK: (topK + 1)·slotBytes.
func MinBudget(slotBytes int64, topK int) int64 { return int64(topK+1) * slotBytes }

// SlotSize is the slot stride for experts of expertBytes (§9.2).
func SlotSize(expertBytes int64) int64 { return align4096(expertBytes + 2*storage.Alignment) }

// Experts implements moe.ExpertSource: it appends the experts ids of layer
// to dst[:0], leased until release is called (exactly once). Resident
// experts are hits; the others get a slot each (never one that is leased or
// being filled), are read sorted by (shard, offset) on up to
// WithReadWorkers goroutines and published only when complete. A failed or
// short read leaves its slot EMPTY and fails the call with an
// *ExpertLoadError naming the layer and expert; no lease survives a
// failed call.
func (s *Store) Experts(layer int, ids []int, dst []moe.Expert) ([]moe.Expert, func(), error) {
	li, err := s.check(layer, ids)
	if err != nil {
		return nil, nil, err
	}
	if s.nslots == 0 {
		return s.direct(layer, li, ids, dst)
	}
	return s.cached(layer, li, ids, dst)
}

func (s *Store) check(layer int, ids []int) (int, error) {
	if layer < 0 || layer >= len(s.layerIdx) || s.layerIdx[layer] < 0 {
		return 0, &ExpertLoadError{Layer: layer, Expert: -1, Err: ErrUnknownLayer}
	}
	if len(ids) > s.maxBatch {
		return 0, &ExpertLoadError{Layer: layer, Expert: -1,
			Err: fmt.Errorf("%w: %d ids, MaxBatch %d", ErrBatchTooLarge, len(ids), s.maxBatch)}
	}
	for _, id := range ids {
		if id < 0 || id >= s.cfg.NumExperts {
			return 0, &ExpertLoadError{Layer: layer, Expert: id,
				Err: fmt.Errorf("%w: want [0, %d)", ErrExpertID, s.cfg.NumExperts)}
		}
	}
	return int(s.layerIdx[layer]), nil
}

// leaseSet is one call's leases and scratch state, pooled with a release
// function bound once so that a call allocates nothing.
type leaseSet struct {
	s       *Store
	fn      func()
	slots   []int32 // per requested id
	reads   []int32
	errs    []error
	pending []int
	waits   []int
	// direct, at budget 0, is the pooled arena holding this call's experts
	// when the shared scratch had too few free slots; otherwise slots are
	// the shared scratch slots it took.
	direct *arena
}

func (ls *leaseSet) release() {
	s := ls.s
	s.mu.Lock()
	switch {
	case ls.direct != nil:
		s.scratch = append(s.scratch, ls.direct)
		ls.direct = nil
	case s.nslots == 0:
		s.scratchFree = append(s.scratchFree, ls.slots...)
	default:
		for _, sl := range ls.slots {
			if sl >= 0 {
				s.slots[sl].leases--
			}
		}
	}
	s.mu.Unlock()
	ls.slots = ls.slots[:0]
	s.leases.Put(ls)
}

func (s *Store) key(li, id int) int32 { return int32(li*s.cfg.NumExperts + id) }

// demand counts and traces a call's requests and settles a pending
// prediction for the layer. Called under mu.
func (s *Store) demand(layer, li int, ids []int) {
	n := int64(len(ids))
	s.run.requests += n
	s.cur.requests += n
	if s.opts.tracer != nil {
		for _, id := range ids {
			s.opts.tracer.ExpertRequest(layer, id)
		}
	}
	if p := s.pred[li]; len(p) > 0 {
		var hit int64
		for _, e := range p {
			if slices.Contains(ids, e) {
				hit++
			}
		}
		s.add(func(c *counters) {
			c.predicted += int64(len(p))
			c.predictedActual += n
			c.predictedHits += hit
		})
		s.pred[li] = p[:0]
	}
}

// add applies fn to the step and run counters.
func (s *Store) add(fn func(c *counters)) {
	fn(&s.run)
	fn(&s.cur)
}

func (s *Store) cached(layer, li int, ids []int, dst []moe.Expert) ([]moe.Expert, func(), error) {
	ls := s.leases.Get().(*leaseSet)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.leases.Put(ls)
		return nil, nil, &ExpertLoadError{Layer: layer, Expert: -1, Err: ErrClosed}
	}
	s.fillSeq++
	token := s.fillSeq
	s.demand(layer, li, ids)
	if s.speculate && len(ids) <= s.cfg.TopK {
		s.last[li] = append(s.last[li][:0], ids...)
	}
	ls.slots = ls.slots[:0]
	ls.pending = ls.pending[:0]
	for i := range ids {
		ls.slots = append(ls.slots, -1)
		ls.pending = append(ls.pending, i)
	}
	var failed error
	for len(ls.pending) > 0 && failed == nil {
		ls.reads, ls.waits = ls.reads[:0], ls.waits[:0]
		needBG, bgSeen := false, uint64(0)
		for _, i := range ls.pending {
			k := s.key(li, ids[i])
			if sl := s.slotOf[k]; sl >= 0 {
				st := &s.slots[sl]
				if st.state == stateInflight && st.owner != token {
					ls.waits = append(ls.waits, i) // someone else is reading it
					continue
				}
				s.hit(sl, st)
				st.leases++
				ls.slots[i] = sl
				continue
			}
			sl, err := s.reserve(k, token, originDemand)
			if err != nil && errors.Is(err, ErrNoEvictableSlot) && s.bgInflight > 0 {
				// Background reads hold the slots: wait for one to land.
				ls.waits = append(ls.waits, i)
				if !needBG {
					needBG, bgSeen = true, s.bgDone
				}
				continue
			}
			if err != nil {
				failed = &ExpertLoadError{Layer: layer, Expert: ids[i], Err: err}
				s.unreserve(ls.reads)
				ls.reads = ls.reads[:0]
				break
			}
			s.add(func(c *counters) { c.misses++ })
			s.slots[sl].leases++
			ls.slots[i] = sl
			ls.reads = append(ls.reads, sl)
		}
		if len(ls.reads) > 0 {
			s.mu.Unlock()
			t0 := time.Now()
			var dec time.Duration
			ls.errs, dec = s.readSlots(ls.reads, ls.errs)
			d := time.Since(t0)
			s.mu.Lock()
			s.add(func(c *counters) {
				c.loadNanos += int64(d)
				c.decodeNanos += int64(dec)
			})
			if err := s.publish(ls.reads, ls.errs, originDemand); err != nil && failed == nil {
				failed = &ExpertLoadError{Layer: layer, Expert: err.expert, Err: err.err}
			}
		}
		if failed != nil {
			break
		}
		for s.anyInflight(ls.waits, li, ids, token) || (needBG && s.bgDone == bgSeen) {
			s.cond.Wait()
		}
		ls.pending = append(ls.pending[:0], ls.waits...)
	}
	if failed != nil {
		for _, sl := range ls.slots {
			if sl >= 0 && s.slots[sl].leases > 0 { // unreserved slots hold none
				s.slots[sl].leases--
			}
		}
		s.freeFailed(ls.reads)
		s.add(func(c *counters) { c.failures++ })
		s.mu.Unlock()
		ls.slots = ls.slots[:0]
		s.leases.Put(ls)
		return nil, nil, failed
	}
	out := dst[:0]
	for _, sl := range ls.slots {
		out = append(out, s.slots[sl].expert)
	}
	// Speculation (§9.4) reserves only now, with this call's experts
	// leased, so it can never evict them; its reads overlap the caller's
	// compute.
	var spec []int32
	if s.speculate && li+1 < len(s.cfg.Layers) && len(s.last[li+1]) > 0 {
		spec = s.reserveBackground(li+1, s.last[li+1], originSpec)
	}
	s.mu.Unlock()
	s.startBackground(spec, originSpec)
	return out, ls.fn, nil
}

// hit counts a request served from slot sl. Called under mu.
func (s *Store) hit(sl int32, st *slot) {
	s.policy.Hit(int(sl))
	trueHit := st.state == stateResident && st.since < s.step
	usedPrefetch := st.state == stateResident && !st.used && st.origin == originPrefetch
	usedSpec := st.state == stateResident && !st.used && st.origin == originSpec
	if st.state == stateResident {
		st.used = true
	}
	s.add(func(c *counters) {
		c.hits++
		if trueHit {
			c.trueHits++
		}
		if usedPrefetch {
			c.prefetchUsed++
		}
		if usedSpec {
			c.specUsed++
		}
	})
}

func (s *Store) anyInflight(waits []int, li int, ids []int, token uint64) bool {
	for _, i := range waits {
		if sl := s.slotOf[s.key(li, ids[i])]; sl >= 0 && s.slots[sl].state == stateInflight && s.slots[sl].owner != token {
			return true
		}
	}
	return false
}

// reserve gives key k a slot (a free one, else the policy's victim) and
// marks it INFLIGHT for token. Called under mu.
func (s *Store) reserve(k int32, token uint64, origin uint8) (int32, error) {
	var sl int32
	if n := len(s.free); n > 0 {
		sl = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		v, err := s.policy.Victim(s.evictFn)
		if err != nil {
			return -1, err
		}
		sl = int32(v)
		st := &s.slots[sl]
		s.slotOf[st.key] = -1
		wastedP := !st.used && st.origin == originPrefetch
		wastedS := !st.used && st.origin == originSpec
		s.add(func(c *counters) {
			c.evictions++
			if wastedP {
				c.prefetchWasted++
			}
			if wastedS {
				c.specWasted++
			}
		})
	}
	st := &s.slots[sl]
	*st = slot{state: stateInflight, origin: origin, key: k, owner: token}
	s.slotOf[k] = sl
	s.policy.Insert(int(sl), uint64(k))
	return sl, nil
}

// unreserve undoes reservations that were never read. Called under mu.
func (s *Store) unreserve(reads []int32) {
	for _, sl := range reads {
		st := &s.slots[sl]
		s.slotOf[st.key] = -1
		s.policy.Remove(int(sl))
		st.state, st.leases = stateEmpty, 0
		s.free = append(s.free, sl)
	}
	if len(reads) > 0 {
		s.cond.Broadcast()
	}
}

// freeFailed returns the EMPTY slots of failed reads to the free list once
// their leases are gone. Called under mu.
func (s *Store) freeFailed(reads []int32) {
	for _, sl := range reads {
		if st := &s.slots[sl]; st.state == stateEmpty && st.leases == 0 && !slices.Contains(s.free, sl) {
			s.free = append(s.free, sl)
		}
	}
}

type readFailure struct {
	expert int
	err    error
}

// publish makes completed reads RESIDENT and returns failed ones to EMPTY
// (they are never served). Called under mu.
func (s *Store) publish(reads []int32, errs []error, origin uint8) *readFailure {
	var first *readFailure
	for i, sl := range reads {
		st := &s.slots[sl]
		if errs[i] == nil {
			st.state, st.since, st.owner = stateResident, s.step, 0
			n := s.locs[st.key].storedBytes()
			s.add(func(c *counters) {
				c.bytesRead += n
				switch origin {
				case originPrefetch:
					c.prefetchReads++
					c.prefetchBytes += n
				case originSpec:
					c.specReads++
				}
			})
			continue
		}
		if first == nil {
			first = &readFailure{expert: int(st.key) % s.cfg.NumExperts, err: errs[i]}
		}
		s.slotOf[st.key] = -1
		s.policy.Remove(int(sl))
		st.state, st.expert, st.owner = stateEmpty, moe.Expert{}, 0
		s.add(func(c *counters) { c.readErrors++ })
	}
	s.cond.Broadcast()
	return first
}

// readSlots fills the INFLIGHT slots reads, sorted by (shard, offset), on
// up to WithReadWorkers goroutines; errs[i] is the outcome of reads[i] after
// the sort. It returns the time spent decoding records.
func (s *Store) readSlots(reads []int32, errs []error) ([]error, time.Duration) {
	slices.SortFunc(reads, func(a, b int32) int {
		return s.locs[s.slots[a].key].compare(&s.locs[s.slots[b].key])
	})
	errs = slices.Grow(errs[:0], len(reads))[:len(reads)]
	var dec atomic.Int64
	s.parallel(len(reads), func(rd *reader, i int) {
		st := &s.slots[reads[i]]
		mem := s.arena.mem[int64(reads[i])*s.slotBytes : int64(reads[i]+1)*s.slotBytes]
		var d time.Duration
		st.expert, d, errs[i] = s.fill(mem, &s.locs[st.key], rd)
		dec.Add(int64(d))
	})
	return errs, time.Duration(dec.Load())
}

// reader is one read goroutine's decoding state: a rans.Decoder (20 KiB of
// tables) and a 4096-aligned scratch buffer for the stored bytes of a coded
// expert. Idle readers are kept by the Store, so a load allocates nothing.
type reader struct {
	dec     rans.Decoder
	scratch []byte
}

// getReader takes an idle reader, making one when none is idle; nil when
// no expert is coded.
func (s *Store) getReader() *reader {
	if s.scratchBytes == 0 {
		return nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if n := len(s.readers); n > 0 {
		rd := s.readers[n-1]
		s.readers = s.readers[:n-1]
		return rd
	}
	buf := make([]byte, s.scratchBytes+storage.Alignment)
	skip := (storage.Alignment - int64(addr(buf)%storage.Alignment)) % storage.Alignment
	return &reader{scratch: buf[skip : skip+s.scratchBytes : skip+s.scratchBytes]}
}

func (s *Store) putReader(rd *reader) {
	if rd == nil {
		return
	}
	s.rmu.Lock()
	s.readers = append(s.readers, rd)
	s.rmu.Unlock()
}

// parallel runs fn(0..n−1) on up to WithReadWorkers goroutines, each with
// its own reader.
func (s *Store) parallel(n int, fn func(rd *reader, i int)) {
	w := min(s.opts.workers, n)
	if w <= 1 {
		rd := s.getReader()
		for i := range n {
			fn(rd, i)
		}
		s.putReader(rd)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		rd := s.getReader()
		defer s.putReader(rd)
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(rd, i)
		}
	}
	wg.Add(w - 1)
	for range w - 1 {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

func (l *location) compare(o *location) int {
	if l.file != o.file {
		return int(l.file - o.file)
	}
	a, b := l.lo, o.lo
	if !l.contiguous {
		a = l.off[0]
	}
	if !o.contiguous {
		b = o.off[0]
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fill reads one expert into mem (a 4096-aligned slot) and builds its
// views. A coded expert is read into rd's scratch and decoded into mem; the
// duration is the time spent decoding. On error the slot's content is
// unspecified (the caller leaves it EMPTY).
func (s *Store) fill(mem []byte, l *location, rd *reader) (moe.Expert, time.Duration, error) {
	buf := mem
	if l.coded() {
		buf = rd.scratch
	}
	parts, err := s.readParts(buf, l)
	if err != nil {
		return moe.Expert{}, 0, err
	}
	var dec time.Duration
	if c := l.code; c != nil {
		for i, p := range parts {
			d := mem[c.dst[i] : c.dst[i]+c.dlen[i] : c.dst[i]+c.dlen[i]]
			if i%2 == 0 && c.rec[i/2] {
				t0 := time.Now()
				err := rd.dec.DecodeInto(d, p)
				dec += time.Since(t0)
				if err != nil {
					return moe.Expert{}, dec, fmt.Errorf("cache: decoding w%d.weight_packed: %w", i/2+1, err)
				}
			} else {
				copy(d, p)
			}
			parts[i] = d
		}
	}
	e, err := l.views(parts)
	return e, dec, err
}

// readParts reads the expert's stored parts into buf (4096-aligned, at
// least readSpan bytes).
func (s *Store) readParts(buf []byte, l *location) ([nparts][]byte, error) {
	r := s.files[l.file].r
	var parts [nparts][]byte
	if l.contiguous {
		p, err := r.ReadAligned(buf, l.lo, l.n)
		if err != nil {
			return parts, err
		}
		if int64(len(p)) != l.n {
			return parts, fmt.Errorf("%w: got %d of %d bytes", safetensors.ErrShortRead, len(p), l.n)
		}
		for i := range parts {
			parts[i] = p[l.at[i] : l.at[i]+l.size[i] : l.at[i]+l.size[i]]
		}
		return parts, nil
	}
	for i := range parts {
		p, err := r.ReadAligned(buf[l.at[i]:], l.off[i], l.size[i])
		if err != nil {
			return parts, err
		}
		if int64(len(p)) != l.size[i] {
			return parts, fmt.Errorf("%w: got %d of %d bytes", safetensors.ErrShortRead, len(p), l.size[i])
		}
		parts[i] = p[:len(p):len(p)]
	}
	return parts, nil
}

// views builds the expert's MXFP4 matrices over its six parts.
func (l *location) views(parts [nparts][]byte) (moe.Expert, error) {
	var ms [3]quant.Matrix
	for w := range ms {
		m, err := quant.NewMXFP4(int(l.rows[w]), int(l.cols[w]), parts[2*w], parts[2*w+1])
		if err != nil {
			return moe.Expert{}, err
		}
		ms[w] = m
	}
	return moe.Expert{W1: ms[0], W2: ms[1], W3: ms[2]}, nil
}

// direct serves a call without a cache: every expert is read into scratch
// memory owned by the call until release.
func (s *Store) direct(layer, li int, ids []int, dst []moe.Expert) ([]moe.Expert, func(), error) {
	ls := s.leases.Get().(*leaseSet)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.leases.Put(ls)
		return nil, nil, &ExpertLoadError{Layer: layer, Expert: -1, Err: ErrClosed}
	}
	s.demand(layer, li, ids)
	s.add(func(c *counters) { c.misses += int64(len(ids)) })
	sc, err := s.takeScratch(ls, len(ids))
	s.mu.Unlock()
	if err != nil {
		s.leases.Put(ls)
		return nil, nil, &ExpertLoadError{Layer: layer, Expert: -1, Err: err}
	}
	if sc == nil {
		if sc, err = newArena(int64(s.maxBatch)*s.slotBytes, false); err != nil {
			s.leases.Put(ls)
			return nil, nil, &ExpertLoadError{Layer: layer, Expert: -1, Err: err}
		}
		ls.direct = sc
	}
	out := slices.Grow(dst[:0], len(ids))[:len(ids)]
	errs := slices.Grow(ls.errs[:0], len(ids))[:len(ids)]
	t0 := time.Now()
	var dec atomic.Int64
	s.parallel(len(ids), func(rd *reader, i int) {
		at := int64(i)
		if ls.direct == nil {
			at = int64(ls.slots[i])
		}
		mem := sc.mem[at*s.slotBytes : (at+1)*s.slotBytes]
		var d time.Duration
		out[i], d, errs[i] = s.fill(mem, &s.locs[s.key(li, ids[i])], rd)
		dec.Add(int64(d))
	})
	d := time.Since(t0)
	ls.errs = errs
	var failed error
	var bytes int64
	for i, err := range errs {
		if err != nil && failed == nil {
			failed = &ExpertLoadError{Layer: layer, Expert: ids[i], Err: err}
		}
		if err == nil {
			bytes += s.locs[s.key(li, ids[i])].storedBytes()
		}
		errs[i] = nil
	}
	s.mu.Lock()
	s.add(func(c *counters) {
		c.loadNanos += int64(d)
		c.decodeNanos += dec.Load()
		c.bytesRead += bytes
		if failed != nil {
			c.failures++
		}
	})
	s.mu.Unlock()
	if failed != nil {
		clear(out)
		ls.release()
		return nil, nil, failed
	}
	return out, ls.fn, nil
}

// takeScratch gives a budget-0 call of n experts its read memory: n free
// slots of the shared scratch, recorded in ls.slots, returning that arena;
// else a pooled arena of its own, recorded in ls.direct; nil when the
// caller must map a new one. Called under mu.
func (s *Store) takeScratch(ls *leaseSet, n int) (*arena, error) {
	if s.scratchMem == nil {
		a, err := newArena(int64(s.maxBatch)*s.slotBytes, false)
		if err != nil {
			return nil, err
		}
		s.scratchMem = a
		for i := s.maxBatch - 1; i >= 0; i-- {
			s.scratchFree = append(s.scratchFree, int32(i)) // pop order 0, 1, 2, …
		}
	}
	if k := len(s.scratchFree); k >= n {
		ls.slots = append(ls.slots[:0], s.scratchFree[k-n:]...)
		s.scratchFree = s.scratchFree[:k-n]
		return s.scratchMem, nil
	}
	if k := len(s.scratch); k > 0 {
		ls.direct = s.scratch[k-1]
		s.scratch = s.scratch[:k-1]
		return ls.direct, nil
	}
	return nil, nil
}

// OverlapWaves implements moe.WaveOverlapper: without a cache the read
// scratch is taken slot by slot, so a second call of up to MaxBatch/2
// experts can read while the first one's experts are leased, within the
// scratch the plan promises. With a cache, two calls could lease more slots
// than a small cache can give up at once; with one scratch slot there is
// nothing to halve.
func (s *Store) OverlapWaves() bool { return s.nslots == 0 && s.maxBatch >= 2 }

// BeginStep marks the start of a token step: the step counters restart and
// content published before this call counts as resident for the true hit
// rate (§9.5).
func (s *Store) BeginStep() {
	s.mu.Lock()
	s.step++
	s.steps++
	s.cur = counters{}
	s.mu.Unlock()
}

// Close waits for background reads, closes the shard readers and unmaps the
// arena. With experts still leased it returns ErrLeased and keeps the
// arena mapped.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.bg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	leased := 0
	for i := range s.slots {
		if s.slots[i].leases > 0 {
			leased++
		}
	}
	errs := []error{s.closeFiles()}
	if leased > 0 {
		errs = append(errs, fmt.Errorf("%w: %d slots", ErrLeased, leased))
		return errors.Join(errs...)
	}
	errs = append(errs, s.arena.free())
	if len(s.scratchFree) == s.maxBatch { // else leased views keep it mapped
		errs = append(errs, s.scratchMem.free())
		s.scratchMem, s.scratchFree = nil, nil
	}
	for _, a := range s.scratch {
		errs = append(errs, a.free())
	}
	s.scratch = nil
	return errors.Join(errs...)
}

// ioMode summarises the readers' modes.
func (s *Store) ioMode() (string, string) {
	modes := map[storage.Mode]bool{}
	var reason []string
	for _, sf := range s.files {
		modes[sf.r.Mode()] = true
		if why := sf.r.FallbackReason(); why != nil && len(reason) == 0 {
			reason = append(reason, why.Error())
		}
	}
	switch {
	case len(modes) > 1:
		return "mixed", strings.Join(reason, "; ")
	case modes[storage.ModeDirect]:
		return "direct", ""
	}
	return "buffered", strings.Join(reason, "; ")
}
