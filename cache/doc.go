// Package cache is the routed-expert store of SPEC §9: Kimi K3's routed
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
// # Slots, leases and policies
//
// The arena is an anonymous 2 MiB-aligned mapping advised MADV_HUGEPAGE,
// cut into ⌊Budget / SlotBytes⌋ slots of SlotSize(expertBytes) =
// align4096(expertBytes + 2·4096) bytes, so every slot starts on a 4096-byte
// boundary. A budget below TopK + 1 slots is refused (ErrBudgetTooSmall names
// the minimum); Budget 0 runs without a cache, reading every request into
// per-call scratch memory that is reused and retains nothing.
//
// Experts (moe.ExpertSource; GetMany and Get are the same call) serves a
// layer's picks: resident experts are hits, the others are given a slot
// (EMPTY → INFLIGHT), read sorted by (shard, offset) on up to
// WithReadWorkers goroutines and published (RESIDENT) only when complete. A
// failed or short read returns its slot to EMPTY and fails the call with an
// *moe.ExpertLoadError naming the layer and expert. Returned experts are
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
