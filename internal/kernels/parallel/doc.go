// Package parallel splits independent work, such as the rows of a mat-vec,
// into contiguous chunks run on a few goroutines.
//
// It exists so that every caller splits work the same deterministic way:
// chunk boundaries depend only on the arguments, never on timing, and a
// chunk is always a contiguous index range, so an output element is computed
// by exactly one call on exactly one goroutine. Reductions are never split
// (§5.4); callers hand it only independent outputs.
//
// There is no package state. For starts plain goroutines per call and
// waits for them. Starting one costs about a microsecond (see
// BenchmarkForOverhead), but waking the parked thread that runs it costs far
// more on a small VM (50–100 µs), so callers size chunks with Grain to hold
// at least MinWork operations and small problems run inline. A Pool, owned
// by whoever creates it (the engine makes one per model), keeps its helpers
// awake between calls and makes the same chunks (see BenchmarkPoolVsFor).
//
// It must never import anything model-specific or numeric; it is a leaf
// package used by internal/kernels/dot callers, quant and the engine.
package parallel
