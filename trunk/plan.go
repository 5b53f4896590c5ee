package trunk

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/storage"
)

// Defaults of PlanConfig.
const (
	// DefaultRing is the number of ring slots asked for: two let the next piece be read while
	// the current one is computed on.
	DefaultRing = 2
	// MaxRing bounds the ring request.
	MaxRing = 8
	// DefaultSlotBytes is the largest piece streamed in one slot. A larger tensor streams in
	// row ranges, so no slot needs to hold a whole layer (or the 2.35 GB output head).
	DefaultSlotBytes = 64 << 20
	// window is the room a slot keeps for the aligned window around a piece: up to 4096 bytes
	// before it and after it (§9.2).
	window = 2 * storage.Alignment
)

// PlanConfig is the input of Plan.
type PlanConfig struct {
	// Budget is the bytes the dense weights may hold resident: pinned tensors, ring slots and
	// side bytes. It must be positive.
	Budget int64
	// Ring is the number of slots asked for (1 … MaxRing; 0 means DefaultRing). Fewer are
	// granted when the budget is tight; one slot streams without read-ahead.
	Ring int
	// SlotBytes caps a slot (0 means DefaultSlotBytes); tensors larger than a slot stream in
	// row ranges. It never goes below the floor's slot.
	SlotBytes int64
	// SideBytes are resident bytes outside the matrices that the budget must also cover (norms,
	// biases, conv taps and other small vectors as the model holds them).
	SideBytes int64
}

// Plan says what is pinned and what streams. It is computed from tensor sizes alone, before
// anything is allocated, so a caller can print it, marshal it to JSON or refuse it first.
type Plan struct {
	Budget int64 `json:"budget_bytes"`
	Floor  int64 `json:"floor_bytes"` // the smallest budget these tensors can run in
	// MinSlot is the smallest slot: the largest piece that cannot be split (a row of the widest
	// matrix, or a whole matrix the layer reads by rows) plus its read window.
	MinSlot int64 `json:"min_slot_bytes"`

	Layers      int   `json:"layers"`
	Pinned      []int `json:"pinned_layers"`
	HeadPinned  bool  `json:"head_pinned"`
	EmbedPinned bool  `json:"embedding_pinned"`
	PinnedBytes int64 `json:"pinned_bytes"`            // arena bytes of every pinned matrix
	EmbedBytes  int64 `json:"embedding_bytes"`         // resident embedding table (0 when its rows are read per token)
	StreamBytes int64 `json:"streamed_bytes_per_pass"` // bytes read per full pass over the layers and the head
	Slots       int   `json:"ring_slots"`
	SlotBytes   int64 `json:"slot_bytes"`
	RingBytes   int64 `json:"ring_bytes"`
	SideBytes   int64 `json:"side_bytes"`
	Total       int64 `json:"total_bytes"`
	ReadAhead   bool  `json:"read_ahead"` // a background reader runs (at least two slots)
	// Split says the ring is the bytes of the one slot the budget allows, cut in two slots so
	// that the next piece is read while the current one is computed on; a piece larger than a
	// slot (a whole matrix the layer reads by rows) takes both, and is read while neither is
	// in use. RingBytes may then exceed Slots·SlotBytes by less than one alignment unit.
	Split        bool  `json:"split_slot,omitempty"`
	LayerBytes   int64 `json:"layer_bytes"`
	HeadBytes    int64 `json:"head_bytes"`
	EmbedRowSize int64 `json:"embedding_row_bytes"`
	// Lossless12Bytes are the bytes of the tensors planned in lossless12 (§6.11), embedding
	// included: what ChooseSource weighs.
	Lossless12Bytes int64 `json:"lossless12_bytes,omitempty"`
}

// Hit returns the share of the walk's items (layers and head) that are pinned: the
// deterministic trunk hit rate.
func (p *Plan) Hit() float64 {
	n := p.Layers + 1
	h := len(p.Pinned)
	if p.HeadPinned {
		h++
	}
	return float64(h) / float64(n)
}

// String itemises the plan, one component a line.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trunk budget %s (floor %s)\n", Size(p.Budget), Size(p.Floor))
	fmt.Fprintf(&b, "  pinned      %s  %d/%d layers%s\n", Size(p.PinnedBytes), len(p.Pinned), p.Layers, map[bool]string{true: " + lm_head", false: ""}[p.HeadPinned])
	if p.Slots > 0 {
		split := ""
		if p.Split {
			split = " (one slot's bytes, split: a whole matrix larger than a slot takes both)"
		}
		fmt.Fprintf(&b, "  ring        %s  %d × %s slots, read-ahead %v%s\n", Size(p.RingBytes), p.Slots, Size(p.SlotBytes), p.ReadAhead, split)
	} else {
		fmt.Fprintf(&b, "  ring        none (everything pinned)\n")
	}
	if p.EmbedPinned {
		fmt.Fprintf(&b, "  embedding   %s  resident\n", Size(p.EmbedBytes))
	} else {
		fmt.Fprintf(&b, "  embedding   rows read per token (%d B each)\n", p.EmbedRowSize)
	}
	fmt.Fprintf(&b, "  side        %s  norm gains at stored width, AttnRes folds, float32 rest\n", Size(p.SideBytes))
	fmt.Fprintf(&b, "  streamed    %s per pass (trunk hit %.1f%%)\n", Size(p.StreamBytes), 100*p.Hit())
	fmt.Fprintf(&b, "  total       %s", Size(p.Total))
	return b.String()
}

// Size formats a byte count with the unit chosen by its magnitude (B, kB, MB, GB, TB, decimal),
// three significant digits: the one size format of plans, errors and the CLI, so a screen never
// shows "0.0 MB" beside "0.004 GB".
func Size(n int64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	v, i := float64(n), 0
	for (v >= 999.5 || v <= -999.5) && i < len(units)-1 {
		v /= 1000
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%d B", n)
	case v >= 99.95 || v <= -99.95:
		return fmt.Sprintf("%.0f %s", v, units[i])
	case v >= 9.995 || v <= -9.995:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// item is one pinnable unit of the walk: a layer's matrices or the head.
type item struct {
	id    int
	bytes int64 // pinned arena bytes
	size  int64 // payload bytes read per pass
}

// pinnedBytes is the arena room a pinned tensor takes: its aligned window, so it can be read
// with O_DIRECT straight into place.
func pinnedBytes(t *Tensor) int64 {
	return roundUp(storage.WindowLen(t.Offset, t.Size), storage.Alignment)
}

// minPiece is the smallest slot that can hold t's smallest piece: the whole tensor when Whole,
// else one row, plus the aligned window.
func minPiece(t *Tensor) int64 {
	n := t.rowBytes()
	if t.Whole {
		n = t.Size
	}
	return roundUp(n+window, storage.Alignment)
}

// NewPlan plans tensors (every matrix of every layer and the head, and the embedding table if
// present) under cfg.
func NewPlan(tensors []Tensor, numLayers int, cfg PlanConfig) (*Plan, error) {
	if cfg.Budget <= 0 {
		return nil, fmt.Errorf("%w: budget %d bytes", ErrBudget, cfg.Budget)
	}
	ring := cfg.Ring
	if ring == 0 {
		ring = DefaultRing
	}
	if ring < 1 || ring > MaxRing {
		return nil, fmt.Errorf("trunk: ring of %d slots: want 1 … %d", ring, MaxRing)
	}
	slotCap := cfg.SlotBytes
	if slotCap == 0 {
		slotCap = DefaultSlotBytes
	}
	if slotCap < 0 || cfg.SideBytes < 0 {
		return nil, fmt.Errorf("trunk: negative slot size %d or side bytes %d", slotCap, cfg.SideBytes)
	}
	p := &Plan{Budget: cfg.Budget, Layers: numLayers, SideBytes: cfg.SideBytes, Pinned: []int{}}
	items := make(map[int]*item)
	var embed *Tensor
	var minSlot, maxSlot, rowSlot int64 // rowSlot: the largest piece of a matrix that streams by rows
	for i := range tensors {
		t := &tensors[i]
		if err := t.check(); err != nil {
			return nil, err
		}
		if t.Format == quant.Lossless12 {
			p.Lossless12Bytes += t.Size
		}
		if t.Item == Embed {
			if embed != nil {
				return nil, fmt.Errorf("%w: two embedding tables (%s, %s)", ErrTensor, embed.Name, t.Name)
			}
			embed = t
			continue
		}
		if t.Item >= numLayers {
			return nil, fmt.Errorf("%w: %s belongs to layer %d of %d", ErrTensor, t.Name, t.Item, numLayers)
		}
		it := items[t.Item]
		if it == nil {
			it = &item{id: t.Item}
			items[t.Item] = it
		}
		it.bytes += pinnedBytes(t)
		it.size += t.Size
		if t.Item == Head {
			p.HeadBytes += t.Size
		} else {
			p.LayerBytes += t.Size
		}
		minSlot = max(minSlot, minPiece(t))
		if !t.Whole {
			rowSlot = max(rowSlot, minPiece(t))
		}
		maxSlot = max(maxSlot, roundUp(t.Size+window, storage.Alignment))
	}
	if embed != nil {
		p.EmbedRowSize = embed.rowBytes()
	}
	p.Floor, p.MinSlot = cfg.SideBytes+minSlot, minSlot
	if len(items) == 0 {
		p.Floor = cfg.SideBytes
	}
	avail := cfg.Budget - cfg.SideBytes
	if cfg.Budget < p.Floor {
		return nil, fmt.Errorf("%w: %d bytes (%s) asked, the minimum for this model is %d bytes (%s)",
			ErrBudget, cfg.Budget, Size(cfg.Budget), p.Floor, Size(p.Floor))
	}

	// Pin the largest items first: a pinned byte saves a byte of reading per pass whatever it
	// belongs to, and large pins leave the fewest bytes of budget unused. Ties go to the lower
	// layer, the head last.
	order := make([]*item, 0, len(items))
	for _, it := range items {
		order = append(order, it)
	}
	slices.SortFunc(order, func(a, b *item) int {
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return cmp.Compare(key(a.id), key(b.id))
	})
	// A slot larger than a sixteenth of the budget buys fewer reads at the price of pins; a
	// tensor larger than a slot streams in row ranges, so no slot needs to hold the largest one.
	capSlot := max(minSlot, min(roundUp(slotCap, storage.Alignment), (avail/16)&^(storage.Alignment-1)))
	// The ring: slots as large as the cap allows (fewer, larger reads), shrunk towards the floor's
	// slot before the read-ahead slot is given up.
	fit := func(slot int64) (int, int64) {
		r := ring
		for int64(r)*slot > avail {
			if slot > minSlot {
				slot = max(minSlot, (avail/int64(r))&^(storage.Alignment-1))
				continue
			}
			if r == 1 {
				break
			}
			r--
		}
		return r, slot
	}
	pinnedSet := map[int]bool{}
	var pinned int64
	pin := func(ringBytes int64) {
		clear(pinnedSet)
		pinned = 0
		for _, it := range order {
			if pinned+it.bytes+ringBytes <= avail {
				pinned += it.bytes
				pinnedSet[it.id] = true
			}
		}
	}
	// streamedMax is the slot the unpinned tensors can use (0 when everything is pinned).
	streamedMax := func() int64 {
		var n int64
		for i := range tensors {
			if t := &tensors[i]; t.Item != Embed && !pinnedSet[t.Item] {
				n = max(n, roundUp(t.Size+window, storage.Alignment))
			}
		}
		if n == 0 {
			return 0
		}
		return max(minSlot, min(capSlot, n))
	}
	// Pinning shrinks what streams, which may shrink the slots, which frees budget for pins:
	// iterate to a fixed point (§8.5 step 1), at most 8 times.
	r, slot := fit(min(capSlot, max(minSlot, maxSlot)))
	for range 8 {
		pin(int64(r) * slot)
		need := streamedMax()
		if need == 0 || need == slot {
			break
		}
		r, slot = fit(need)
	}
	// After oscillation the last pin set may need a larger slot than the last fit: unpin the
	// smallest pinned items until ring and pins fit (step 2).
	for {
		need := streamedMax()
		if need == 0 {
			r, slot = 0, 0
			break
		}
		r, slot = fit(need)
		if int64(r)*slot+pinned <= avail || len(pinnedSet) == 0 {
			break
		}
		for k := len(order) - 1; k >= 0; k-- {
			if it := order[k]; pinnedSet[it.id] {
				delete(pinnedSet, it.id)
				pinned -= it.bytes
				break
			}
		}
	}
	streamed := 0
	for _, it := range order {
		switch {
		case !pinnedSet[it.id]:
			streamed++
			p.StreamBytes += it.size
		case it.id == Head:
			p.HeadPinned = true
		default:
			p.Pinned = append(p.Pinned, it.id)
		}
	}
	slices.Sort(p.Pinned)
	p.Slots, p.SlotBytes, p.RingBytes = r, slot, int64(r)*slot
	// One slot reads and computes in turn. When its halves still hold a row of every matrix
	// that streams by rows, two half slots read the next piece meanwhile in the same bytes; a
	// whole matrix larger than a half takes both (§8.6). A ring of 1 asked for keeps one slot.
	if half := (slot / 2) &^ (storage.Alignment - 1); r == 1 && ring >= 2 && half >= rowSlot && rowSlot > 0 {
		p.Slots, p.SlotBytes, p.Split = 2, half, true
	}
	p.ReadAhead = p.Slots >= 2
	p.PinnedBytes = pinned
	if embed != nil && streamed == 0 {
		if e := pinnedBytes(embed); pinned+e <= avail {
			p.EmbedPinned, p.EmbedBytes = true, e
		}
	}
	p.Total = p.SideBytes + p.PinnedBytes + p.RingBytes + p.EmbedBytes
	return p, nil
}

func key(id int) int {
	if id == Head {
		return 1 << 30
	}
	return id
}

func (p *Plan) pinnedItem(id int) bool {
	switch id {
	case Head:
		return p.HeadPinned
	case Embed:
		return p.EmbedPinned
	}
	return slices.Contains(p.Pinned, id) // only at Open; a caller's Plan need not be sorted
}

// Source says where a model reads the matrices a packed trunk holds in lossless12 (§6.11.6):
// the pack's encoded bytes, or the checkpoint's bf16 originals they were encoded from. Both give
// the same bits; they differ in the bytes held and read and in the time decoding takes.
type Source string

// The sources of a packed trunk's lossless12 matrices.
const (
	SourceAuto   Source = ""       // ChooseSource decides
	SourcePacked Source = "packed" // the pack's encoded matrices
	SourceShards Source = "shards" // the checkpoint's bf16 originals
)

// Lossless12Threads is the fewest threads at which a resident lossless12 trunk is taken to
// decode as fast as the bf16 one on this CPU, for the level its kernels run at
// (lossless12.Level). A resident trunk saves no reads, so the encoded one wins only where the
// bf16 mat-vec is held to the memory rate and the lossless12 decode, spread over the threads,
// keeps up with that rate at 0.71× the bytes:
//   - AVX2 and AVX-512: 7 (the AVX-512 decoder's rate is unmeasured: no machine of the
//     project's has had AVX-512 since it was written, so it takes the AVX2 figure). Decoding
//     to bf16 and the bf16 kernel together take about 2.0 G weights/s a core, half the
//     bf16 mat-vec's rate (-bench 'VsBF16/4096x2048' ./quant/lossless12, 0.48–0.52× at one and
//     two workers on a 2-core EPYC); that machine reads 23–28 GB/s on two goroutines, 11–14 G
//     bf16 weights/s, which the decoder matches from six to seven cores.
//   - Go: 48: the pure-Go path takes 0.30 G weights/s a core on that machine.
func Lossless12Threads() int {
	switch lossless12.Level() {
	case "avx512", "avx2":
		return 7
	}
	return 48
}

// ChooseSource decides where a model on threads threads reads a packed trunk's lossless12
// matrices, and says why in a phrase. packed is the plan over the pack; shards the plan over the
// bf16 originals under the same budget, nil when the shards cannot provide them; minThreads the
// fewest threads at which a resident lossless12 matrix decodes as fast as bf16
// (Lossless12Threads()). want other than SourceAuto is obeyed (SourceShards needs shards).
// Otherwise the originals are read only where the format loses: when both plans pin
// everything (nothing streams, so the pack saves no reads) and there are fewer threads than
// minThreads; anywhere else the pack is read, as its bytes are what streams or what fits.
func ChooseSource(want Source, packed, shards *Plan, threads, minThreads int) (Source, string) {
	switch {
	case want == SourcePacked:
		return SourcePacked, "asked for"
	case want == SourceShards:
		return SourceShards, "asked for"
	case packed.Lossless12Bytes == 0:
		return SourcePacked, "no matrix of the pack is in lossless12"
	case packed.StreamBytes > 0:
		return SourcePacked, fmt.Sprintf("the budget streams %s a pass, fewer bytes in lossless12", Size(packed.StreamBytes))
	case threads >= minThreads:
		return SourcePacked, fmt.Sprintf("resident, decoded on %d threads", threads)
	case shards == nil:
		return SourcePacked, "the shards do not provide the bf16 originals"
	case shards.StreamBytes > 0:
		return SourcePacked, fmt.Sprintf("the bf16 originals would stream %s a pass under the budget", Size(shards.StreamBytes))
	}
	return SourceShards, fmt.Sprintf("everything resident on %d thread(s), fewer than %d: bf16 is read at the memory rate, lossless12 would be decoded slower", threads, minThreads)
}
