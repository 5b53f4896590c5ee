// Package testkit is the one home of what the module's tests share: the
// oracle fixtures and the fixture models, the synthetic perf checkpoint,
// float digests and bit-identity checks, allocation counts, peak RSS, the
// re-executed child process, and the memory-read yardstick of the
// benchmarks.
//
// # Fixtures
//
// The oracle fixtures live outside the module (SPEC §13) and are never
// copied into it. Tests find them through the K3_FIXTURES environment
// variable, or ../shared/fixtures relative to the module root. When the
// directory is missing a test is skipped with a message, except under
// CI=true, where a missing fixture directory fails the test: CI must never
// pass by skipping. [Models] lists every directory of fixtures/models/, so a
// new checkpoint dropped there is tested without code changes.
//
// # Yardstick
//
// On a shared machine absolute MB/s mean little; a kernel's throughput
// divided by what a plain memory-read loop delivers in the same run is
// stable. [ReadLoop] and [ReadLoopWorkers] are separate benchmarks of the
// read loop; [Paired] alternates a kernel with the read loop inside one
// benchmark and reports both bandwidths and their ratio. [Filled] makes
// buffers whose pages are really backed by memory.
//
// # Layering
//
// It is for _test.go files only: it imports "testing" and must never be
// imported by library code. Of this module it imports only the leaf
// internal/parallel, so that any other package's internal tests can use it
// without an import cycle; what needs a library package takes it as an
// argument (the synthesizer of [Checkpoint]) or lives in a subpackage
// (opfix, which builds matrices).
package testkit
