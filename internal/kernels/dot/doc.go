// Package dot holds the R16 dot-product and mat-vec kernels for plain
// floating-point weights (F32, BF16, F16), the innermost loop of every
// projection, router and lm_head evaluation.
//
// # Numeric contract
//
// Every result follows the R16 reduction of §5.2 exactly: sixteen f64
// accumulators, element i < 16·⌊n/16⌋ goes to lane i mod 16 in ascending
// order, the lanes are reduced as c_l = (a[l]+a[l+4]) + (a[l+8]+a[l+12]) and
// then (c0+c1) + (c2+c3), the remaining tail is added sequentially and the sum
// is rounded once to float32. Because an f32×f32 product is exact in f64, the
// kernels may fuse multiply and add without changing a bit; they may not
// change the lane partition or the tree. The matrix forms (MatVec*, MatMul*)
// return, element by element, exactly what the single dot product returns, so
// batching, row splitting and SIMD never change a logit.
//
// # Implementations
//
// On amd64 the kernels run in Go assembly at the widest level the CPU has,
// chosen once from CPUID: AVX-512 (F, BW, DQ, VL; two zmm accumulators per
// row, four rows or four activation rows per weight pass), else AVX2 with
// FMA (F16 also needs F16C; four ymm accumulators, two rows per pass). The
// bf16 mat-mul passes two weight rows over four activation rows in column
// blocks whose activations stay in L1 (AVX-512), or three weight rows in
// four quarter passes of twelve ymm accumulators (AVX2, whose sixteen
// registers cannot hold a whole output's lanes for more than one pair of
// rows). From 32 activation rows on, the
// AVX-512 mat-mul is packed like a GEMM: a group of weight rows is widened
// once into a float64 panel and every six activation rows pass over it in
// column chunks, the accumulators stored unrounded between chunks
// (gemm_amd64.go), so a widened weight serves all n rows instead of four.
// Everywhere else, under the purego build tag, or on older CPUs the pure-Go
// twin in generic.go runs. Every level keeps the R16 lane partition and tree,
// so all give identical bits; the tests run every level the CPU has against
// the twin, on near-cancelling data where a wrong lane map shows. To run a
// whole program on a narrower level, disable features with GODEBUG, which
// golang.org/x/sys/cpu honours: GODEBUG=cpu.avx512f=off selects AVX2,
// GODEBUG=cpu.avx2=off the pure-Go twin. The one documented
// exception is the payload of a NaN result: whether any NaN occurs is
// identical, which NaN bit pattern survives the adds is not specified by Go.
//
// # Memory layout
//
// Weights are raw little-endian bytes as found in a safetensors file (often an
// mmap view at an arbitrary offset), so no alignment is assumed anywhere.
// Rows are contiguous: row r of a matrix with cols columns starts at byte
// r·cols·elemSize.
//
// # Imports
//
// This package is a leaf: it must never import anything model-specific
// (config, safetensors, quant, attention, moe, the root package) nor
// internal/kernels/parallel; callers decide how to split rows across goroutines
// (its benchmarks use internal/kernels/parallel and internal/testkit, tests only).
// It depends only on golang.org/x/sys/cpu, for feature detection, and on
// internal/kernels/floatbits, the one BF16/F16 widening of the module.
package dot
