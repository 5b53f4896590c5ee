//go:build !amd64 || purego

package attention

func axpyBlock3Applies(w int) bool { return false }

func axpyBlock3(acc []float64, as int, a []float64, ak int, b []float32, bs, k, w int) {
	panic("attention: axpyBlock3 without the kernel")
}
