//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package attention

import (
	"unsafe"

	"github.com/k3-project/k3/internal/kernels/dot"
)

// scoreRows sets dst[s] = R16(rows[s], q) for the len(dst) rows of width
// len(q) packed in rows: one mat-vec, so q is widened once rather than once
// per cached position. On a little-endian machine a []float32 is its own
// little-endian f32 encoding, which is what dot.MatVecF32 reads; each row is
// bit-identical to dot.F32Float(row, q) by the dot package's contract.
func scoreRows(dst, rows, q []float32) {
	if len(rows) == 0 {
		return
	}
	dot.MatVecF32(dst, unsafe.Slice((*byte)(unsafe.Pointer(&rows[0])), 4*len(rows)), q)
}
