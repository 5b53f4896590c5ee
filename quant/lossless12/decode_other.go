//go:build !amd64 || purego

package lossless12

// haveAVX2 is false: this build has no assembly.
const haveAVX2 = false

// decodeBlocks decodes nothing: the Go decoder does every block.
func decodeBlocks(dst, sm, nib, bases []byte, n int) int { return 0 }

// plainBlocks checks nothing: plainBlocksGo does every block.
func plainBlocks(nib, bases []byte, n, ahead int) int { return 0 }

// haveFused is false: this build has no assembly.
const haveFused = false

// dotBlocks does nothing here: the kernels decode into a scratch buffer.
func dotBlocks(sm, nib, bases []byte, x []float64, n int, acc *[16]float64) int { return 0 }

// haveWide is false: this build has no assembly.
const haveWide = false

// dotRowsWide takes no block here: Go adds every block to the lanes.
func dotRowsWide(rows []byte, nr int, h Header, x []float64, k, n int, acc *[4][16]float64, ne *[4]int, out []float32) int {
	return 0
}

// decodeRowsWide decodes nothing here: the Go decoder does every block.
func decodeRowsWide(rows []byte, nr int, h Header, dst []byte) (k, ne int) { return 0, 0 }

// passesWide runs no pass here: Go adds every block to the lanes.
func passesWide(rows []byte, h Header, x []float64, passes int, out []float32) int { return 0 }
