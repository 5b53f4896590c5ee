// Package isacheck holds probes of the AVX-512 instructions whose
// definitions the kernels of this module lean on beyond plain arithmetic —
// byte and qword permutes, expands and compresses, the bit-matrix affine
// transform, a gather, ternary logic, the quadword conversions — and its
// test checks each against a Go reference written from the Intel SDM's
// definition, on random operands and under masks.
//
// On real hardware the test is a formality. It exists for emulators: the
// AVX-512 kernels can be tested on a machine without AVX-512 only under an
// emulated CPU (internal/kernels/cpulevels/bochs.sh runs a package's tests
// under Bochs), and there a failing kernel test may be the emulator's fault.
// bochs.sh runs this package's test first, so each verdict comes with the
// list of instructions the emulator gets wrong. Bochs 2.7 gets three wrong:
// VGF2P8AFFINEQB returns the complement of every byte; VPEXPANDB from
// memory under a partial mask put 0 in a byte the mask selects instead of
// the source's next byte (all-ones and empty masks come out right); and an
// EVEX gather whose index is in Z16–Z31, the form the MXFP4 mat-mul uses,
// raises SIGILL (with the index in Z0–Z15 it is right).
//
// Each probe runs in a child process of the test binary, because the Go
// runtime cannot recover from SIGILL and the other probes must still run.
//
// A probe whose instruction set the CPU lacks is skipped. Under the purego
// build tag and off amd64 the package is empty.
package isacheck
