package sim

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/cache/trace"
)

// K3 defaults of §9.7.
const (
	DefaultExpertBytes = 17_547_264
	DefaultDiskMBs     = 1234
	// RequestsPerToken is one token's demand requests on K3 (92 MoE
	// layers × 16 experts): ntok = ⌊requests / 1472⌋, at least 1.
	RequestsPerToken = 1472
	// MinSlots: rows with fewer slots are skipped.
	MinSlots = 17
)

// DefaultCapacitiesGB are the table's cache sizes.
var DefaultCapacitiesGB = []float64{8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1450}

// Outcome is one replay's counts.
type Outcome struct {
	Hits, Misses, Evictions int64
}

// HitRate is Hits / (Hits + Misses) in percent.
func (o Outcome) HitRate() float64 {
	if n := o.Hits + o.Misses; n > 0 {
		return 100 * float64(o.Hits) / float64(n)
	}
	return 0
}

// ReplayOptions adjust Replay.
type ReplayOptions struct {
	// HoldLayerRun treats every key requested since the layer last changed
	// as leased (not evictable), as a Store serving one layer's experts per
	// call with the leases released before the next layer holds them.
	// §9.7's simulator has no leases (false).
	HoldLayerRun bool
}

// Replay runs keys (layer<<20 | expert) through policy p over nslots slots.
func Replay(keys []uint64, p cache.Policy, nslots int, o ReplayOptions) Outcome {
	r := newReplayer(p, nslots, o.HoldLayerRun)
	for _, k := range keys {
		r.step(k)
	}
	return r.out
}

// replayer owns the key → slot map and the free slots around a Policy, the
// way the Store does.
type replayer struct {
	p      cache.Policy
	n      int
	used   int
	slotOf map[uint64]int32
	keyOf  []uint64
	hold   bool
	run    int64
	runOf  []int64 // layer run in which the slot was last requested
	layer  uint64
	out    Outcome
	evict  func(int) bool
}

func newReplayer(p cache.Policy, nslots int, hold bool) *replayer {
	r := &replayer{p: p, n: nslots, slotOf: make(map[uint64]int32, nslots), keyOf: make([]uint64, nslots),
		hold: hold, runOf: make([]int64, nslots), layer: ^uint64(0)}
	r.evict = cache.Always
	if hold {
		r.evict = func(s int) bool { return r.runOf[s] != r.run }
	}
	return r
}

// step serves one request and reports whether it hit.
func (r *replayer) step(k uint64) bool {
	if l := k >> 20; l != r.layer {
		r.layer = l
		r.run++
	}
	if s, ok := r.slotOf[k]; ok {
		r.out.Hits++
		r.p.Hit(int(s))
		r.runOf[s] = r.run
		return true
	}
	r.out.Misses++
	var s int
	if r.used < r.n {
		s = r.used
		r.used++
	} else {
		v, err := r.p.Victim(r.evict)
		if err != nil {
			return false // everything held: served without caching
		}
		s = v
		delete(r.slotOf, r.keyOf[s])
		r.out.Evictions++
	}
	r.p.Insert(s, k)
	r.slotOf[k] = int32(s)
	r.keyOf[s] = k
	r.runOf[s] = r.run
	return false
}

// Belady replays keys under Belady's optimal policy with bypass over
// capacity slots: on a miss with a full cache the resident key used
// farthest in the future is the candidate; if its next use comes before
// the incoming key's, the incoming key is not cached.
func Belady(keys []uint64, capacity int) Outcome {
	n := len(keys)
	next := make([]int32, n)
	last := make(map[uint64]int32, 1024)
	for i := n - 1; i >= 0; i-- {
		if j, ok := last[keys[i]]; ok {
			next[i] = j
		} else {
			next[i] = int32(n) // never again
		}
		last[keys[i]] = int32(i)
	}
	var out Outcome
	resident := make(map[uint64]int32, capacity) // key → its next use
	h := &maxHeap{}
	for i, k := range keys {
		if _, ok := resident[k]; ok {
			out.Hits++
			resident[k] = next[i]
			h.push(heapEntry{next[i], k})
			continue
		}
		out.Misses++
		if len(resident) < capacity {
			resident[k] = next[i]
			h.push(heapEntry{next[i], k})
			continue
		}
		for { // drop stale entries
			top := h.top()
			if nu, ok := resident[top.key]; ok && nu == top.next {
				break
			}
			h.pop()
		}
		v := h.top()
		if v.next < next[i] {
			continue // bypass: the victim is needed sooner than the newcomer
		}
		h.pop()
		delete(resident, v.key)
		out.Evictions++
		resident[k] = next[i]
		h.push(heapEntry{next[i], k})
	}
	return out
}

type heapEntry struct {
	next int32
	key  uint64
}

// maxHeap orders entries by next use, farthest first.
type maxHeap struct{ e []heapEntry }

func (h *maxHeap) top() heapEntry { return h.e[0] }

func (h *maxHeap) push(x heapEntry) {
	h.e = append(h.e, x)
	for i := len(h.e) - 1; i > 0; {
		p := (i - 1) / 2
		if h.e[p].next >= h.e[i].next {
			break
		}
		h.e[p], h.e[i] = h.e[i], h.e[p]
		i = p
	}
}

func (h *maxHeap) pop() {
	n := len(h.e) - 1
	h.e[0] = h.e[n]
	h.e = h.e[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.e[l].next > h.e[m].next {
			m = l
		}
		if r < n && h.e[r].next > h.e[m].next {
			m = r
		}
		if m == i {
			return
		}
		h.e[m], h.e[i] = h.e[i], h.e[m]
		i = m
	}
}

// KeyCount is a key's request count and first appearance.
type KeyCount struct {
	Layer, Expert int
	Count         int64
	First         int // index of the first request
}

// counts returns every key's count, most frequent first (ties: earliest
// first appearance).
func counts(keys []uint64) []KeyCount {
	idx := make(map[uint64]int, 1024)
	var out []KeyCount
	for i, k := range keys {
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, KeyCount{Layer: int(k >> 20), Expert: int(k & (1<<20 - 1)), First: i})
		}
		out[j].Count++
	}
	slices.SortFunc(out, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.First, b.First)
	})
	return out
}

// PinLRU pins the ⌊capacity/2⌋ (at most capacity − 1) most frequent keys of
// this same trace (ties: earliest first appearance) and runs LRU over the
// other max(capacity − npin, 1) slots. A pinned key's first request is a
// compulsory miss.
func PinLRU(keys []uint64, capacity int) Outcome {
	return pinLRU(keys, capacity, counts(keys))
}

func pinLRU(keys []uint64, capacity int, ranked []KeyCount) Outcome {
	npin := min(capacity/2, capacity-1, len(ranked))
	pinned := make(map[uint64]bool, npin)
	for _, kc := range ranked[:max(npin, 0)] {
		pinned[uint64(kc.Layer)<<20|uint64(kc.Expert)] = false
	}
	rest := max(capacity-npin, 1)
	r := newReplayer(cache.NewLRU(rest), rest, false)
	var out Outcome
	for _, k := range keys {
		if seen, ok := pinned[k]; ok {
			if seen {
				out.Hits++
			} else {
				out.Misses++
				pinned[k] = true
			}
			continue
		}
		r.step(k)
	}
	out.Hits += r.out.Hits
	out.Misses += r.out.Misses
	out.Evictions = r.out.Evictions
	return out
}

// Options configure Run.
type Options struct {
	ExpertBytes  int64     // default DefaultExpertBytes
	DiskMBs      float64   // default DefaultDiskMBs
	CapacitiesGB []float64 // default DefaultCapacitiesGB
}

// Row is one cache size's results.
type Row struct {
	GB                          float64
	Slots                       int
	LRU, S3FIFO, Belady, PinLRU Outcome
	// GBReadPerToken is S3-FIFO misses · ExpertBytes / 1e9 / ntok (also
	// for LRU); SecPerToken the S3-FIFO figure at DiskMBs (expert I/O only).
	GBReadPerToken, LRUGBReadPerToken, SecPerToken float64
}

// PolicyNames names the replayed policies, in the order of Row.Outcomes.
var PolicyNames = [4]string{"LRU", "S3-FIFO", "Belady (bypass)", "PIN+LRU"}

// Outcomes returns the row's outcomes in the order of PolicyNames.
func (r Row) Outcomes() [4]Outcome { return [4]Outcome{r.LRU, r.S3FIFO, r.Belady, r.PinLRU} }

// Report is a whole simulation.
type Report struct {
	Requests, Distinct, Tokens int
	ExpertBytes                int64
	DiskMBs                    float64
	Hottest                    []KeyCount // the six most requested keys
	// ReusePct = (Requests − Distinct)/Requests in percent: also the
	// compulsory-miss ceiling of any policy's hit rate.
	ReusePct float64
	// NeededGB holds every touched expert; PoolGB every expert of the layers
	// seen (layers × (max expert + 1)).
	NeededGB, PoolGB float64
	Rows             []Row
}

// Keys converts requests to simulator keys (layer<<20 | expert).
func Keys(reqs []trace.Request) []uint64 {
	keys := make([]uint64, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key()
	}
	return keys
}

// Run simulates every policy at every capacity.
func Run(reqs []trace.Request, o Options) Report {
	if o.ExpertBytes <= 0 {
		o.ExpertBytes = DefaultExpertBytes
	}
	if o.DiskMBs <= 0 {
		o.DiskMBs = DefaultDiskMBs
	}
	if o.CapacitiesGB == nil {
		o.CapacitiesGB = DefaultCapacitiesGB
	}
	keys := Keys(reqs)
	ranked := counts(keys)
	rep := Report{Requests: len(keys), Distinct: len(ranked), Tokens: max(1, len(keys)/RequestsPerToken),
		ExpertBytes: o.ExpertBytes, DiskMBs: o.DiskMBs}
	rep.Hottest = ranked[:min(6, len(ranked))]
	if len(keys) > 0 {
		rep.ReusePct = 100 * float64(len(keys)-len(ranked)) / float64(len(keys))
	}
	rep.NeededGB = float64(len(ranked)) * float64(o.ExpertBytes) / 1e9
	layers := map[int]bool{}
	maxExpert := -1
	for _, r := range reqs {
		layers[int(r.Layer)] = true
		maxExpert = max(maxExpert, int(r.Expert))
	}
	rep.PoolGB = float64(len(layers)) * float64(maxExpert+1) * float64(o.ExpertBytes) / 1e9
	for _, gb := range o.CapacitiesGB {
		slots := int(gb * 1e9 / float64(o.ExpertBytes))
		if slots < MinSlots {
			continue
		}
		// A cache of 2·distinct + 2 slots already holds every key under each policy (PIN+LRU pins
		// half of its slots), so larger ones replay as that: the work and memory of a row are
		// bounded by the trace, not by a capacity that may be absurdly large for tiny experts.
		sim := min(slots, 2*len(ranked)+2)
		row := Row{GB: gb, Slots: slots,
			LRU:    Replay(keys, cache.NewLRU(sim), sim, ReplayOptions{}),
			S3FIFO: Replay(keys, cache.NewS3FIFO(sim), sim, ReplayOptions{}),
			Belady: Belady(keys, sim),
			PinLRU: pinLRU(keys, sim, ranked),
		}
		perTok := float64(o.ExpertBytes) / 1e9 / float64(rep.Tokens)
		row.GBReadPerToken = float64(row.S3FIFO.Misses) * perTok
		row.LRUGBReadPerToken = float64(row.LRU.Misses) * perTok
		row.SecPerToken = row.GBReadPerToken * 1000 / o.DiskMBs
		rep.Rows = append(rep.Rows, row)
	}
	return rep
}

// Format writes the report as the simulator's text table.
func (r Report) Format(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "requests %d  distinct keys %d  tokens %d  expert %d bytes  disk %.0f MB/s\n",
		r.Requests, r.Distinct, r.Tokens, r.ExpertBytes, r.DiskMBs)
	b.WriteString("hottest")
	for _, h := range r.Hottest {
		fmt.Fprintf(&b, "  L%d/e%d ×%d", h.Layer, h.Expert, h.Count)
	}
	fmt.Fprintf(&b, "\nreuse %.2f%%  compulsory-miss ceiling %.2f%%  every touched expert %.2f GB  whole pool %.2f GB\n",
		r.ReusePct, r.ReusePct, r.NeededGB, r.PoolGB)
	fmt.Fprintf(&b, "%6s %7s %7s %9s %8s %9s %12s %8s\n", "CACHE", "SLOTS", "LRU%", "S3-FIFO%", "BELADY%", "PIN+LRU%", "GB READ/TOK", "SEC/TOK")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%4.0fGB %7d %7.2f %9.2f %8.2f %9.2f %12.2f %8.2f\n", row.GB, row.Slots,
			row.LRU.HitRate(), row.S3FIFO.HitRate(), row.Belady.HitRate(), row.PinLRU.HitRate(),
			row.GBReadPerToken, row.SecPerToken)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is Format into a string.
func (r Report) String() string {
	var b strings.Builder
	r.Format(&b)
	return b.String()
}

// RunFile reads the trace at path (mapped with golang.org/x/exp/mmap) and
// simulates it: the `k3 sim-cache <expert_trace.bin>` command is
// RunFile(path, Options{}) followed by Report.Format.
func RunFile(path string, o Options) (Report, error) {
	tr, err := trace.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("sim: %w", err)
	}
	defer tr.Close()
	reqs, err := tr.Requests()
	if err != nil {
		return Report{}, fmt.Errorf("sim: %w", err)
	}
	return Run(reqs, o), nil
}
