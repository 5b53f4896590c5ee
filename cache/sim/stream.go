package sim

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/cache/trace"
)

// ErrGeometry reports options that contradict the geometry a trace's header
// records (a trace of another model).
var ErrGeometry = errors.New("sim: geometry differs from the trace's")

// ErrTooLong reports a trace longer than the simulator's next-use indices
// (4 bytes a request) can number.
var ErrTooLong = errors.New("sim: trace too long")

// maxRequests bounds a replayed trace: next uses are stored as uint32 and
// the value len(trace) means "never again".
const maxRequests = math.MaxUint32 - 1

// piece is how many requests a pass reads at a time: the replay's memory
// besides the per-key state.
const piece = 1 << 14

// source is a trace read in pieces: a Trace file or requests in memory.
type source interface {
	Len() int
	ReadRequests(dst []trace.Request, first int64) (int, error)
}

type memSource []trace.Request

func (m memSource) Len() int { return len(m) }

func (m memSource) ReadRequests(dst []trace.Request, first int64) (int, error) {
	return copy(dst, m[first:]), nil
}

// nextStore holds every request's next use between the backward and the
// forward pass.
type nextStore interface {
	put(first int64, next []uint32) error
	get(first int64, next []uint32) error
}

// memNext keeps next uses in memory (Run: the requests are in memory too).
type memNext struct{ v []uint32 }

func (m *memNext) put(first int64, next []uint32) error {
	if need := int(first) + len(next); need > len(m.v) {
		m.v = slices.Grow(m.v, need-len(m.v))[:need]
	}
	copy(m.v[first:], next)
	return nil
}

func (m *memNext) get(first int64, next []uint32) error {
	copy(next, m.v[first:])
	return nil
}

// fileNext keeps next uses in an unlinked temporary file, so that
// RunFile's memory does not grow with the trace.
type fileNext struct {
	f   *os.File
	buf []byte
}

// newFileNext creates the file in dir, else in os.TempDir(), and unlinks it
// at once: it disappears with the process whatever happens.
func newFileNext(dir string) (*fileNext, error) {
	f, err := os.CreateTemp(dir, ".k3-sim-next-*")
	if err != nil && dir != os.TempDir() {
		f, err = os.CreateTemp("", ".k3-sim-next-*")
	}
	if err != nil {
		return nil, fmt.Errorf("sim: next-use file: %w", err)
	}
	os.Remove(f.Name())
	return &fileNext{f: f, buf: make([]byte, 4*piece)}, nil
}

func (n *fileNext) put(first int64, next []uint32) error {
	b := n.buf[:4*len(next)]
	for i, v := range next {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	if _, err := n.f.WriteAt(b, 4*first); err != nil {
		return fmt.Errorf("sim: next-use file: %w", err)
	}
	return nil
}

func (n *fileNext) get(first int64, next []uint32) error {
	b := n.buf[:4*len(next)]
	if m, err := n.f.ReadAt(b, 4*first); m != len(b) {
		return fmt.Errorf("sim: next-use file at byte %d: %w", 4*first, cmp.Or(err, io.ErrUnexpectedEOF))
	}
	for i := range next {
		next[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return nil
}

func (n *fileNext) Close() error { return n.f.Close() }

// keyStat is one key's count and, during the backward pass, the index of
// its latest-seen (that is, earliest) request.
type keyStat struct {
	key   uint64
	count int64
	first int64
}

// rowState is one simulated size's four policies.
type rowState struct {
	lru, s3 *replayer
	bel     *belady
	pin     *pinLRU
}

// run is Run and RunFile: a backward pass counts keys and computes next
// uses, a forward pass drives every size's policies at once.
func run(src source, o Options, next nextStore) (Report, error) {
	if o.ExpertBytes <= 0 {
		o.ExpertBytes = DefaultExpertBytes
	}
	if o.DiskMBs <= 0 {
		o.DiskMBs = DefaultDiskMBs
	}
	if o.CapacitiesGB == nil {
		o.CapacitiesGB = DefaultCapacitiesGB
	}
	if o.TopK <= 0 {
		o.TopK = defaultTopK
	}
	if o.MoELayers <= 0 {
		o.MoELayers = defaultMoELayers
	}
	n := int64(src.Len())
	if n > maxRequests {
		return Report{}, fmt.Errorf("%w: %d requests, at most %d", ErrTooLong, n, int64(maxRequests))
	}
	progress := func(int64) {}
	if o.Progress != nil {
		progress = func(done int64) { o.Progress(done, 2*n) }
	}

	// Backward pass.
	idx := make(map[uint64]int32, 1024)
	var stats []keyStat
	layers := map[int32]bool{}
	maxExpert := int32(-1)
	reqs := make([]trace.Request, piece)
	nu := make([]uint32, piece)
	for end := n; end > 0; {
		start := max(0, end-piece)
		k := int(end - start)
		if m, err := src.ReadRequests(reqs[:k], start); err != nil {
			return Report{}, fmt.Errorf("sim: %w", err)
		} else if m != k {
			return Report{}, fmt.Errorf("sim: %w: %d of %d requests at %d", io.ErrUnexpectedEOF, m, k, start)
		}
		for i := k - 1; i >= 0; i-- {
			r := reqs[i]
			key := r.Key()
			pos := start + int64(i)
			j, ok := idx[key]
			if !ok {
				j = int32(len(stats))
				idx[key] = j
				stats = append(stats, keyStat{key: key, first: n})
				layers[r.Layer] = true
				maxExpert = max(maxExpert, r.Expert)
			}
			nu[i] = uint32(stats[j].first) // n when never again
			stats[j].first = pos
			stats[j].count++
		}
		if err := next.put(start, nu[:k]); err != nil {
			return Report{}, err
		}
		end = start
		progress(n - end)
	}
	ranked := make([]KeyCount, len(stats))
	for i, st := range stats {
		ranked[i] = KeyCount{Layer: int(st.key >> 20), Expert: int(st.key & (1<<20 - 1)), Count: st.count, First: int(st.first)}
	}
	slices.SortFunc(ranked, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.First, b.First)
	})
	idx, stats = nil, nil

	rpt := int64(o.TopK) * int64(o.MoELayers)
	rep := Report{Requests: int(n), Distinct: len(ranked), Tokens: int(max(1, n/rpt)),
		ExpertBytes: o.ExpertBytes, DiskMBs: o.DiskMBs, TopK: o.TopK, MoELayers: o.MoELayers}
	rep.Hottest = ranked[:min(6, len(ranked))]
	if n > 0 {
		rep.ReusePct = 100 * float64(n-int64(len(ranked))) / float64(n)
	}
	rep.NeededGB = float64(len(ranked)) * float64(o.ExpertBytes) / 1e9
	rep.PoolGB = float64(len(layers)) * float64(maxExpert+1) * float64(o.ExpertBytes) / 1e9

	minSlots := o.TopK + 1
	var states []rowState
	for _, gb := range o.CapacitiesGB {
		fslots := gb * 1e9 / float64(o.ExpertBytes)
		if !(fslots >= float64(minSlots)) { // also NaN
			slots := 0
			if fslots > 0 {
				slots = int(fslots)
			}
			rep.Unsimulated = append(rep.Unsimulated, Unsimulated{GB: gb, Slots: slots,
				Reason: fmt.Sprintf("fewer than %d slots (top-k %d + 1), the least a cache serves a token with; at least %s",
					minSlots, o.TopK, SizeString(float64(minSlots)*float64(o.ExpertBytes)/1e9))})
			rep.order = append(rep.order, false)
			continue
		}
		// A cache of 2·distinct + 2 slots already holds every key under each policy (PIN+LRU pins
		// half of its slots), so larger ones replay as that: the work and memory of a row are
		// bounded by the trace's distinct keys, not by a capacity that may be absurdly large for
		// tiny experts.
		slots := int(min(fslots, 1<<62)) // nominal; the replay uses sim
		sim := min(slots, 2*len(ranked)+2)
		rep.Rows = append(rep.Rows, Row{GB: gb, Slots: slots})
		rep.order = append(rep.order, true)
		states = append(states, rowState{
			lru: newReplayer(cache.NewLRU(sim), sim, false),
			s3:  newReplayer(cache.NewS3FIFO(sim), sim, false),
			bel: newBelady(sim),
			pin: newPinLRU(sim, ranked),
		})
	}

	// Forward pass.
	if len(states) > 0 {
		for start := int64(0); start < n; start += piece {
			k := int(min(piece, n-start))
			if _, err := src.ReadRequests(reqs[:k], start); err != nil {
				return Report{}, fmt.Errorf("sim: %w", err)
			}
			if err := next.get(start, nu[:k]); err != nil {
				return Report{}, err
			}
			for i, r := range reqs[:k] {
				key, nx := r.Key(), int64(nu[i])
				for _, st := range states {
					st.lru.step(key)
					st.s3.step(key)
					st.bel.step(key, nx)
					st.pin.step(key)
				}
			}
			progress(n + start + int64(k))
		}
	} else {
		progress(2 * n)
	}
	perTok := float64(o.ExpertBytes) / 1e9 / float64(rep.Tokens)
	for i, st := range states {
		row := &rep.Rows[i]
		row.LRU, row.S3FIFO, row.Belady, row.PinLRU = st.lru.out, st.s3.out, st.bel.out, st.pin.outcome()
		row.GBReadPerToken = float64(row.S3FIFO.Misses) * perTok
		row.LRUGBReadPerToken = float64(row.LRU.Misses) * perTok
		row.SecPerToken = row.GBReadPerToken * 1000 / o.DiskMBs
	}
	return rep, nil
}

// RunFile replays the trace at path without holding it in memory: the
// `k3 sim-cache <expert_trace.bin>` command is RunFile followed by
// Report.Format. The trace's header supplies the geometry and the expert
// size that o leaves zero; an o field that contradicts it is refused
// (ErrGeometry, trace.ErrExpertBytes). A headerless trace is replayed with
// a warning in the Report.
func RunFile(path string, o Options) (Report, error) {
	tr, err := trace.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("sim: %w", err)
	}
	defer tr.Close()
	var warn []string
	h, headed := tr.Header()
	if !headed {
		warn = append(warn, fmt.Sprintf("%s has no header (a trace written before §9.7 gave it one): "+
			"its length and expert size cannot be checked", path))
	} else {
		if err := h.CheckExpertBytes(cmp.Or(o.ExpertBytes, h.ExpertBytes)); err != nil {
			return Report{}, fmt.Errorf("sim: %s: %w", path, err)
		}
		o.ExpertBytes = cmp.Or(o.ExpertBytes, h.ExpertBytes)
		for _, f := range []struct {
			name     string
			opt, hdr *int
		}{{"top-k", &o.TopK, &h.TopK}, {"MoE layers", &o.MoELayers, &h.MoELayers}} {
			if *f.opt > 0 && *f.hdr > 0 && *f.opt != *f.hdr {
				return Report{}, fmt.Errorf("%w: %s: %s %d given, the trace was recorded with %d", ErrGeometry, path, f.name, *f.opt, *f.hdr)
			}
			*f.opt = cmp.Or(*f.opt, *f.hdr)
		}
	}
	if o.ExpertBytes <= 0 {
		warn = append(warn, fmt.Sprintf("expert size unknown: K3's %d bytes assumed", DefaultExpertBytes))
	}
	if o.TopK <= 0 || o.MoELayers <= 0 {
		warn = append(warn, fmt.Sprintf("geometry unknown: K3's top-k %d × %d MoE layers assumed", defaultTopK, defaultMoELayers))
	}
	dir := o.TempDir
	if dir == "" {
		dir = filepath.Dir(path)
	}
	next, err := newFileNext(dir)
	if err != nil {
		return Report{}, err
	}
	defer next.Close()
	rep, err := run(tr, o, next)
	if err != nil {
		return Report{}, fmt.Errorf("%w (%s)", err, path)
	}
	rep.Warnings = warn
	return rep, nil
}
