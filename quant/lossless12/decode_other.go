//go:build !amd64 || purego

package lossless12

// haveAVX2 is false: this build has no assembly.
const haveAVX2 = false

// decodeWhole decodes nothing: the Go decoder does every block.
func decodeWhole(dst, sm, idx, bases, esc []byte, n int, wide bool) (int, bool) { return 0, false }

// haveWide is false: this build has no assembly.
const haveWide = false

// checkWhole checks nothing: the Go check does every block.
func checkWhole(idx, bases, esc []byte, n int) (int, int) { return 0, 0 }
