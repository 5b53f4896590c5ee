//go:build amd64 && !purego

package fmath

import "testing"

var have512, have2 = useAVX512, useAVX2

// kernelSettings lists the paths this machine can run: its kernel levels
// ("avx512", "avx2") and "scalar".
func kernelSettings(tb testing.TB) []string {
	var levels []string
	if have512 {
		levels = append(levels, "avx512")
	} else {
		tb.Log("CPU without AVX-512 DQ: no AVX-512 kernels")
	}
	if have2 {
		levels = append(levels, "avx2")
	}
	return append(levels, "scalar")
}

// setKernel forces a level of kernelSettings; "" restores the CPU's own.
func setKernel(level string) {
	useAVX512 = (level == "avx512" || level == "") && have512
	useAVX2 = (level == "avx2" || level == "") && have2
}
