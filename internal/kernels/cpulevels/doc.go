// Package cpulevels has no code: its test runs the tests of every package
// with assembly on emulated CPUs, so the AVX2 and pre-AVX paths are exercised
// where the machine itself has AVX-512.
//
// The kernels pick their level from CPUID at run time, so on an AVX-512
// machine the AVX2 code paths run only when a test forces them, and nothing
// can force the CPU to refuse an instruction: an AVX-512 instruction left on
// an AVX2 path (the KDA row passes once broadcast their scalars into zmm
// registers before testing for AVX-512) passes every native test there and
// dies with SIGILL on the many CPUs without AVX-512. Under qemu-user with
// -cpu Haswell (AVX2, FMA, no AVX-512) or -cpu Nehalem (no AVX) CPUID tells
// the truth of that CPU and any instruction it lacks traps.
//
// The test needs qemu-x86_64 (Debian: qemu-user) on the PATH and is skipped
// without it or with -short:
//
//	go test ./internal/kernels/cpulevels
//
// qemu-user has no AVX-512, so the AVX-512 kernels cannot be tested this way
// on a machine without it. bochs.sh, beside this file, runs one package's
// tests on an emulated Skylake-X (AVX-512 F, CD, BW, DQ, VL) under Bochs by
// booting a small Linux; it is slow (minutes for a few tests) and outside the
// test command. It runs internal/kernels/isacheck's test first, which names
// the AVX-512 instructions the emulator gets wrong; its comment says what it
// needs and what Bochs 2.7 gets wrong.
package cpulevels
