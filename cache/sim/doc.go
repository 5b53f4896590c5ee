// Package sim replays a routed-expert trace (§9.7) under LRU, S3-FIFO,
// Belady with bypass and PIN+LRU over a range of cache sizes and renders the
// simulator table of §9.7.
//
// LRU and S3-FIFO are the cache package's own Policy types, driven the way
// the Store drives them (hit, else free slot or victim, then insert), so a
// replay of a Store's trace at its slot count and policy reproduces its hit
// and eviction counts. Belady (farthest next use, with bypass) and PIN+LRU
// (the most frequent keys pinned, LRU for the rest) use future knowledge of
// the trace and are upper bounds.
package sim
