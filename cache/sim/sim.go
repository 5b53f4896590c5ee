package sim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
	// MinSlots is K3's TopK + 1: a cache of fewer slots cannot serve
	// one token's picks, so such a size is reported, not simulated.
	MinSlots = 17
	// defaultTopK and defaultMoELayers are K3's, whose product is
	// RequestsPerToken.
	defaultTopK, defaultMoELayers = 16, 92
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
	next := make([]int64, n)
	last := make(map[uint64]int64, 1024)
	for i := n - 1; i >= 0; i-- {
		if j, ok := last[keys[i]]; ok {
			next[i] = j
		} else {
			next[i] = int64(n) // never again
		}
		last[keys[i]] = int64(i)
	}
	b := newBelady(capacity)
	for i, k := range keys {
		b.step(k, next[i])
	}
	return b.out
}

// belady is Belady's policy with bypass, fed one request and its next use
// at a time.
type belady struct {
	capacity int
	resident map[uint64]int64 // key → its next use
	h        maxHeap          // resident keys by next use, with stale entries
	out      Outcome
}

func newBelady(capacity int) *belady {
	return &belady{capacity: capacity, resident: make(map[uint64]int64, capacity)}
}

func (b *belady) step(k uint64, next int64) {
	if _, ok := b.resident[k]; ok {
		b.out.Hits++
		b.resident[k] = next
		b.push(k, next)
		return
	}
	b.out.Misses++
	if len(b.resident) < b.capacity {
		b.resident[k] = next
		b.push(k, next)
		return
	}
	for { // drop stale entries
		top := b.h.top()
		if nu, ok := b.resident[top.key]; ok && nu == top.next {
			break
		}
		b.h.pop()
	}
	v := b.h.top()
	if v.next < next {
		return // bypass: the victim is needed sooner than the newcomer
	}
	b.h.pop()
	delete(b.resident, v.key)
	b.out.Evictions++
	b.resident[k] = next
	b.push(k, next)
}

// push adds an entry; every hit leaves a stale one behind, so when they
// outnumber the live ones the heap is rebuilt from the resident keys, which
// bounds it by the capacity instead of the trace's length. Only keys never
// used again can tie on next use, and which of those goes first changes no
// count.
func (b *belady) push(k uint64, next int64) {
	if len(b.h.e) > 2*len(b.resident)+1024 {
		b.h.e = b.h.e[:0]
		for rk, nu := range b.resident {
			if rk != k {
				b.h.push(heapEntry{nu, rk})
			}
		}
	}
	b.h.push(heapEntry{next, k})
}

type heapEntry struct {
	next int64
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
	p := newPinLRU(capacity, counts(keys))
	for _, k := range keys {
		p.step(k)
	}
	return p.outcome()
}

// pinLRU is PIN+LRU fed one request at a time.
type pinLRU struct {
	pinned map[uint64]bool // key → seen
	hits   int64
	misses int64
	r      *replayer
}

func newPinLRU(capacity int, ranked []KeyCount) *pinLRU {
	npin := min(capacity/2, capacity-1, len(ranked))
	pinned := make(map[uint64]bool, max(npin, 0))
	for _, kc := range ranked[:max(npin, 0)] {
		pinned[uint64(kc.Layer)<<20|uint64(kc.Expert)] = false
	}
	rest := max(capacity-npin, 1)
	return &pinLRU{pinned: pinned, r: newReplayer(cache.NewLRU(rest), rest, false)}
}

func (p *pinLRU) step(k uint64) {
	if seen, ok := p.pinned[k]; ok {
		if seen {
			p.hits++
		} else {
			p.misses++
			p.pinned[k] = true
		}
		return
	}
	p.r.step(k)
}

func (p *pinLRU) outcome() Outcome {
	return Outcome{Hits: p.hits + p.r.out.Hits, Misses: p.misses + p.r.out.Misses, Evictions: p.r.out.Evictions}
}

// Options configure Run and RunFile. Zero fields take the trace header's
// value where RunFile has one, else K3's (reported in Report.Warnings).
type Options struct {
	ExpertBytes  int64     // default DefaultExpertBytes
	DiskMBs      float64   // default DefaultDiskMBs
	CapacitiesGB []float64 // default DefaultCapacitiesGB
	// TopK and MoELayers are the model's experts per token and MoE layers:
	// a token makes TopK·MoELayers requests (ntok) and a cache needs TopK+1
	// slots (fewer is a row with that reason). Default 16 and 92, K3's.
	TopK, MoELayers int
	// Progress, when set, is called after each piece of the replay with
	// the requests processed so far and the total (each request is visited
	// twice, so total is twice the trace's length).
	Progress func(done, total int64)
	// TempDir holds RunFile's next-use file (4 bytes a request, unlinked
	// while open). Default: the trace's directory, else os.TempDir().
	TempDir string
}

// Row is one simulated cache size's results.
type Row struct {
	GB                          float64
	Slots                       int
	LRU, S3FIFO, Belady, PinLRU Outcome
	// GBReadPerToken is S3-FIFO misses · ExpertBytes / 1e9 / ntok (also
	// for LRU); SecPerToken the S3-FIFO figure at DiskMBs (expert I/O only).
	GBReadPerToken, LRUGBReadPerToken, SecPerToken float64
}

// Unsimulated is a requested cache size that could not be simulated, and why.
type Unsimulated struct {
	GB     float64
	Slots  int
	Reason string
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
	// TopK and MoELayers are the geometry the report was computed with.
	TopK, MoELayers int
	Hottest         []KeyCount // the six most requested keys
	// ReusePct = (Requests − Distinct)/Requests in percent: also the
	// compulsory-miss ceiling of any policy's hit rate.
	ReusePct float64
	// NeededGB holds every touched expert; PoolGB every expert of the layers
	// seen (layers × (max expert + 1)).
	NeededGB, PoolGB float64
	// Rows are the simulated sizes, Unsimulated the others; together they
	// are every requested size, and Format prints them in the order asked.
	Rows        []Row
	Unsimulated []Unsimulated
	// Warnings say what the numbers rest on that could not be checked
	// (a headerless trace, a geometry assumed to be K3's).
	Warnings []string
	order    []bool // per requested size: simulated (next of Rows) or not (next of Unsimulated)
}

// Keys converts requests to simulator keys (layer<<20 | expert).
func Keys(reqs []trace.Request) []uint64 {
	keys := make([]uint64, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key()
	}
	return keys
}

// Run simulates every policy at every capacity over requests held in
// memory. RunFile does the same for a trace file without holding it. Its
// only failure, more than 2^32 − 2 requests (ErrTooLong), is a report with
// no rows and the error in its Warnings.
func Run(reqs []trace.Request, o Options) Report {
	rep, err := run(memSource(reqs), o, &memNext{})
	if err != nil {
		return Report{Requests: len(reqs), Warnings: []string{err.Error()}}
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
	fmt.Fprintf(&b, "\nreuse %.2f%%  compulsory-miss ceiling %.2f%%  every touched expert %s  whole pool %s\n",
		r.ReusePct, r.ReusePct, amount(r.NeededGB), amount(r.PoolGB))
	// The read and time columns take the unit of their largest value, so that a small model's
	// rows do not all read 0.00.
	var maxGB, maxSec float64
	for _, row := range r.Rows {
		maxGB, maxSec = max(maxGB, row.GBReadPerToken), max(maxSec, row.SecPerToken)
	}
	readScale, readUnit := unitOf(maxGB * 1e9)
	readScale /= 1e9
	secScale, secUnit := 1.0, "SEC"
	for _, u := range []string{"MS", "µS"} {
		if maxSec*secScale >= 0.01 || maxSec == 0 {
			break
		}
		secScale, secUnit = secScale*1000, u
	}
	fmt.Fprintf(&b, "%6s %7s %7s %9s %8s %9s %12s %8s\n", "CACHE", "SLOTS", "LRU%", "S3-FIFO%", "BELADY%", "PIN+LRU%",
		readUnit+" READ/TOK", secUnit+"/TOK")
	order := r.order
	if len(order) != len(r.Rows)+len(r.Unsimulated) { // a Report built by hand: simulated first
		order = make([]bool, 0, len(r.Rows)+len(r.Unsimulated))
		for range r.Rows {
			order = append(order, true)
		}
		for range r.Unsimulated {
			order = append(order, false)
		}
	}
	var ri, ui int
	for _, simulated := range order {
		if !simulated {
			u := r.Unsimulated[ui]
			ui++
			fmt.Fprintf(&b, "%6s %7d  not simulated: %s\n", SizeString(u.GB), u.Slots, u.Reason)
			continue
		}
		row := r.Rows[ri]
		ri++
		fmt.Fprintf(&b, "%6s %7d %7.2f %9.2f %8.2f %9.2f %12.2f %8.2f\n", SizeString(row.GB), row.Slots,
			row.LRU.HitRate(), row.S3FIFO.HitRate(), row.Belady.HitRate(), row.PinLRU.HitRate(),
			row.GBReadPerToken/readScale, row.SecPerToken*secScale)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// SizeString renders a cache size of gb decimal gigabytes in the largest
// unit up to GB in which it is at least 1 (B, KB, MB, GB), whole numbers
// without decimals and others to three significant digits: "26KB",
// "1.67MB", "64GB", "1450GB".
func SizeString(gb float64) string {
	scale, unit := unitOf(gb * 1e9)
	v := gb * 1e9 / scale
	if r := math.Round(v); math.Abs(v-r) <= 1e-9*math.Max(1, v) {
		return strconv.FormatFloat(r, 'f', -1, 64) + unit
	}
	prec := max(0, 2-int(math.Floor(math.Log10(v))))
	t := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(t, ".") {
		t = strings.TrimRight(strings.TrimRight(t, "0"), ".")
	}
	return t + unit
}

// unitOf returns the divisor and name of the largest unit up to GB in
// which n bytes are at least 1 (B for less than a kilobyte).
func unitOf(n float64) (float64, string) {
	scale, unit := 1.0, "B"
	for _, u := range []string{"KB", "MB", "GB"} {
		if n < scale*1000 {
			break
		}
		scale, unit = scale*1000, u
	}
	return scale, unit
}

// amount renders gb decimal gigabytes with two decimals in the unit that
// reads: "175.65 GB", "613.63 KB".
func amount(gb float64) string {
	scale, unit := unitOf(gb * 1e9)
	return fmt.Sprintf("%.2f %s", gb*1e9/scale, unit)
}

// String is Format into a string.
func (r Report) String() string {
	var b strings.Builder
	r.Format(&b)
	return b.String()
}
