//go:build amd64 && !purego

package nn

import "golang.org/x/sys/cpu"

// useAVX512 selects SiTU-GLU's vector loops; tests clear it to run the Go
// loops on the same machine.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

//go:noescape
func gluArgs(t1, t3 *float64, gate, up *float32, beta1, beta2 float32, n int)

//go:noescape
func gluOut(dst *float32, t1, t3 *float64, s *float32, beta1, beta2 float32, n int)

// gluArgBlocks does gluArgs over the whole blocks of sixteen of g and
// returns how many elements it did.
func gluArgBlocks(t1, t3 []float64, g, u []float32, beta1, beta2 float32) int {
	n := len(g) &^ 15
	if !useAVX512 || n == 0 {
		return 0
	}
	_, _, _ = t1[n-1], t3[n-1], u[n-1]
	gluArgs(&t1[0], &t3[0], &g[0], &u[0], beta1, beta2, n)
	return n
}

// gluOutBlocks does gluOut over the whole blocks of sixteen of dst and
// returns how many elements it did.
func gluOutBlocks(dst []float32, t1, t3 []float64, s []float32, beta1, beta2 float32) int {
	n := len(dst) &^ 15
	if !useAVX512 || n == 0 {
		return 0
	}
	_, _, _ = t1[n-1], t3[n-1], s[n-1]
	gluOut(&dst[0], &t1[0], &t3[0], &s[0], beta1, beta2, n)
	return n
}
