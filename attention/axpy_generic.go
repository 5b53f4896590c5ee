//go:build !amd64 || purego

package attention

func axpy1(acc []float64, a float64, x []float32) { axpy1Go(acc, a, x) }

func axpy4(acc []float64, a []float64, x0, x1, x2, x3 []float32) { axpy4Go(acc, a, x0, x1, x2, x3) }
