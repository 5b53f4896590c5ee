// Package sim replays a routed-expert trace (§9.7) under LRU, S3-FIFO,
// Belady with bypass and PIN+LRU over a range of cache sizes and renders the
// simulator table of §9.7.
//
// Start with RunFile and Report.Format: the `k3 sim-cache` command is those
// two calls. RunFile streams the trace — a backward pass counts the keys
// and writes each request's next use to an unlinked temporary file, one
// forward pass drives every size and policy at once — so its memory depends
// on the trace's distinct keys, not on its length. The geometry (top-k, MoE
// layers, expert size) comes from the trace's header; options that
// contradict it are refused. Every requested size is in the Report: as a
// Row, or as Unsimulated with the reason (fewer slots than top-k + 1).
//
// LRU and S3-FIFO are the cache package's own Policy types, driven the way
// the Store drives them (hit, else free slot or victim, then insert), so a
// replay of a Store's trace at its slot count and policy reproduces its hit
// and eviction counts. Belady (farthest next use, with bypass) and PIN+LRU
// (the most frequent keys pinned, LRU for the rest) use future knowledge of
// the trace and are upper bounds.
package sim
