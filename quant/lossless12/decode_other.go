//go:build !amd64 || purego

package lossless12

// haveAVX2 is false: this build has no assembly.
const haveAVX2 = false

// decodeWhole decodes nothing: the Go decoder does every block.
func decodeWhole(dst, sm, idx, bases, esc []byte, n int) (int, bool) { return 0, false }

// haveFused is false: this build has no assembly.
const haveFused = false

// dotWhole is never called without the assembly (haveFused is false).
func dotWhole(sm, idx, bases, esc []byte, x []float64, n int, acc *[16]float64) int {
	panic("lossless12: dotWhole without the assembly")
}
