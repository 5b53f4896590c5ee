//go:build amd64 && !purego

package fmath

import "testing"

var haveKernel = useAVX512

// kernelSettings lists the paths this machine can run: the kernel (if the
// CPU has it) and the scalar one.
func kernelSettings(tb testing.TB) []bool {
	if !haveKernel {
		tb.Log("CPU without AVX-512 DQ: scalar path only")
		return []bool{false}
	}
	return []bool{true, false}
}

func setKernel(on bool) { useAVX512 = on && haveKernel }
