//go:build !amd64 || purego

package lossless12

// haveAVX2 is false: this build has no assembly.
const haveAVX2 = false

// decodeBlocks decodes nothing: the Go decoder does every block.
func decodeBlocks(dst, sm, nib, bases []byte, n int) int { return 0 }
