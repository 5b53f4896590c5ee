//go:build !amd64 || purego

package nn

func gluArgBlocks(t1, t3 []float64, g, u []float32, beta1, beta2 float32) int { return 0 }

func gluOutBlocks(dst []float32, t1, t3 []float64, s []float32, beta1, beta2 float32) int {
	return 0
}
