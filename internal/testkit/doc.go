// Package testkit is the one home of what the module's tests share, so that
// no package keeps its own copy:
//
//   - the oracle fixtures: [Dir], [Path], [Models] (every directory of
//     fixtures/models/), [LoadReference] (a model's reference.json),
//     [MXFP4] (the released MXFP4 sample), and [CopyDir], [FlipBits],
//     [HideHeaderKey] and [SparseFile] for the tests that damage a
//     checkpoint or exceed a size limit;
//   - the synthetic perf checkpoint of the benchmarks and floor tests,
//     written on first use: [PerfDir], [Perf] and [Checkpoint]; and [Synth]
//     for the small checkpoints a test writes for itself;
//   - bit identity: [Digest], [SameBits], [RequireSameBits] and
//     [RequireSameBitsOrNaN], with [RefF16] as the independent statement of
//     binary16 and [Gaussian] and [RandomBytes] as the seeded inputs;
//   - reading one tensor of a checkpoint by name: [ReadNamed]; the texts of
//     the tokenizer fixtures: [ReadTextCases] and [CorpusTexts]; a file line by
//     line: [Lines] and [JSONLines];
//   - allocation counts: [SkipAllocsUnderRace], [NoAllocs], [OnPools];
//   - a fresh process: [RunChild], [ChildArg] and [ChildLine] re-run the
//     test binary for one test, and [PeakRSS] is what the child reports;
//   - the memory-read yardstick of the benchmarks: [ReadLoop],
//     [ReadLoopWorkers], [Paired], [Filled].
//
// # Fixtures
//
// The oracle fixtures live outside the module (§13) and are never
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
// imported by library code (TestOnlyTestsImportTestkit checks). Of this
// module it imports only the leaf internal/kernels/parallel, so that any other
// package's internal tests can use it without an import cycle; what needs
// a library package takes it as an argument (the synthesizer of
// [Checkpoint]) or lives in a subpackage (opfix, which builds quant
// matrices).
package testkit
