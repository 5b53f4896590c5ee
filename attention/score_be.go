//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package attention

import "github.com/k3-project/k3/internal/kernels/dot"

// scoreRows sets dst[s] = R16(rows[s], q) for the len(dst) rows of width
// len(q) packed in rows (big-endian machines: one dot product per row).
func scoreRows(dst, rows, q []float32) {
	w := len(q)
	for s := range dst {
		dst[s] = dot.F32Float(rows[s*w:(s+1)*w], q)
	}
}
