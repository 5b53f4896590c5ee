// Package fmath provides the transcendental functions used by the model
// kernels (exp, tanh, and the sigmoid/SiLU built from them) in plain Go.
//
// The standard library's math.Exp and math.Tanh have architecture-specific
// assembly (amd64 switches to an FMA path on capable CPUs; arm64, s390x and
// loong64 have their own), so their last bit may differ between machines.
// The engine's determinism contract (§5.5, §5.6) requires identical
// logits everywhere, so every function here is written in portable Go with
// an explicit float64() conversion around each product that could otherwise
// be fused into an FMA by the compiler.
//
// Exp64 uses Cody–Waite range reduction (ln 2 split into a high part with
// trailing zero bits and a low correction) followed by the classic Remez
// rational approximation of the reduced argument; Tanh64 uses a rational
// approximation for |x| < 0.625 and the exp identity elsewhere. Both agree
// with correctly rounded results to within one ulp.
//
// Exp64s, Tanh64s, Sigmoid32s and Exp32s are the slice forms; on amd64 with
// AVX-512 (F and DQ) Exp64s runs eight lanes at a time through a kernel
// that performs Exp64's operations in the same order with the same
// roundings, and gives its bits, as do Tanh64s and the float32 forms' widening
// and narrowing; with AVX2 alone Exp64s (and through it Sigmoid32s and Exp32s)
// and Tanh64s run four lanes at a time the same way, 4–6× and 3.7–4.7× the
// scalar path's rate, and the float32 forms widen and narrow in ymm registers
// (Sigmoid32s 5.4×) (-bench 'SliceForms|Sigmoid32s'). The tests compare every path on the same
// inputs; the purego build tag and GODEBUG=cpu.avx2=off select the scalar one.
//
// This package imports only math (for bit manipulation and constants) and
// golang.org/x/sys/cpu (to detect the kernel's instructions); it must never
// import anything model-specific.
package fmath
