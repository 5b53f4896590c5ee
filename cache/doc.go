// Package cache is the routed-expert store of §9: Kimi K3's routed
// experts (93% of the checkpoint) are never resident as a whole; a Store
// keeps as many as a byte budget allows in a slot arena and reads the rest
// from the shards on demand.
//
// # Locating and reading
//
// New locates the six tensors of every expert of the configured layers
// (w1, w2, w3 × weight_packed, weight_scale), checks them (U8/I8 packed,
// U8/F8_E8M0 scales, 2-D, equal rows, scale_cols·32 = packed_cols·2, one
// shard, and the exact [rows, cols] when Config.Shapes is set) and records
// whether they are contiguous. A contiguous expert (always so in the released
// checkpoint) is fetched with one aligned read of its whole span; otherwise
// each tensor is read into its own aligned window of the slot. Reads use
// O_DIRECT where the file system allows it and fall back to buffered reads,
// which Stats reports (IOMode, IOFallback). WithOpener replaces the file
// access, which is how tests inject failed and short reads.
//
// # Entropy-coded experts
//
// A checkpoint written by k3 compress-experts (package quant/rans) stores
// each expert's packed weights as a CFS1 record: a 1-D U8 tensor stamped
// with its container format in the shard's colibri.fmt metadata. New
// classifies every expert tensor with rans.Inspect under those stamps: a
// stamped record must hold MXFP4 weights and decode to exactly rows·cols/2
// bytes (rows and cols from Config.Shapes, or from the raw scale tensor);
// scales must be raw. A record without its stamp (rans.ErrUnstamped), a
// corrupt record header or a stamp the build does not know is refused with
// ErrExpertTensor naming the tensor: nothing is ever guessed to be coded.
//
// A coded expert is read by the same rules as a raw one (one aligned read
// of its stored span when its six tensors are adjacent), but into the read
// goroutine's scratch buffer; the goroutine's own rans.Decoder then decodes
// each record into the slot and the scales are copied beside it, so the
// slot holds exactly the raw checkpoint's bytes and every kernel result is
// bit-identical. Slots are no bigger than for the raw checkpoint; readers
// (decoder and scratch) are reused, so a load allocates nothing. A record
// that fails to decode fails the load like a failed read: an
// *ExpertLoadError (wrapping rans.ErrCorrupt), the slot left EMPTY.
// BytesRead counts stored bytes, so it shows the container's saving, and
// DecodeSeconds the time spent decoding.
//
// # Slots, leases and policies
//
// The arena is an anonymous 2 MiB-aligned mapping advised MADV_HUGEPAGE,
// cut into ⌊Budget / SlotBytes⌋ slots of SlotSize(expertBytes) =
// align4096(expertBytes + 2·4096) bytes, so every slot starts on a 4096-byte
// boundary. A budget below TopK + 1 slots is refused (ErrBudgetTooSmall names
// the minimum); Budget 0 runs without a cache, reading every request into
// scratch memory that is reused and retains nothing, of TopK slots or
// Config.ScratchSlots. NewPlan reads a budget from one slot to below
// TopK + 1 slots as that scratch size, which is how a caller with a memory
// budget asks for it. A call takes one scratch slot per expert, so two
// calls of half the scratch each can be in flight at once: the MoE reads
// its next half-wave while the current one runs (moe.WaveOverlapper).
//
// Experts (moe.ExpertSource) serves a
// layer's picks: resident experts are hits, the others are given a slot
// (EMPTY → INFLIGHT), read sorted by (shard, offset) on up to
// WithReadWorkers goroutines and published (RESIDENT) only when complete. A
// failed or short read returns its slot to EMPTY and fails the call with an
// *ExpertLoadError naming the layer and expert. Returned experts are
// MXFP4 views of the slot memory, leased until the release function runs: a
// leased or INFLIGHT slot is never a victim. MaxBatch (moe.BatchLimiter)
// tells the MoE how many distinct experts one call may lease, so a prefill
// chunk's union is fetched in waves.
//
// Victims are chosen by a Policy: S3-FIFO (default) or LRU, exactly as §9.3.
// The simulator in cache/sim drives the very same Policy values, so replaying
// a Store's trace reproduces its hits and evictions.
//
// # Prefetch, counters and traces
//
// Prefetch(layer, ids) starts background reads for a prediction (router
// lookahead) without blocking or evicting anything leased; the reads count
// apart from demand misses (prefetch reads, used, wasted) and the prediction
// is scored against the layer's next demand call (precision and recall).
// WithSpeculation prefetches the previous token's picks of the next layer.
// Stats reports the §9.5 counters for the current step (BeginStep marks token
// boundaries) and the run, including the true resident hit rate. A Tracer
// (WithTracer; cache/trace writes the §9.7 files) sees every demand request
// in order.
package cache
