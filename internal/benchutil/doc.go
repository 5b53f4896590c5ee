// Package benchutil gives benchmarks a yardstick: a plain memory-read loop
// measured in the same run as a kernel, so a kernel's throughput can be
// reported as a ratio to what the machine's memory delivers right now (on a
// shared machine absolute MB/s mean little; the ratio is stable).
//
// ReadLoop/ReadLoopWorkers are separate benchmarks of the read loop; Paired
// alternates a kernel with the read loop inside one benchmark and reports
// both bandwidths and their ratio, which is what a shared, noisy machine
// needs. Filled makes buffers whose pages are really backed by memory.
//
// It is for _test.go files only. It imports "testing" and must never be
// imported by library code, nor import anything from this module.
package benchutil
