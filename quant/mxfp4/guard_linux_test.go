//go:build linux

package mxfp4

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// guarded returns an n-byte slice that ends exactly where an inaccessible
// page begins, so a kernel reading past the end of a weight buffer (as an
// mmap'd tensor could end at a page boundary) faults instead of passing.
func guarded(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	return mem[size-page-n : size-page : size-page]
}

// TestBuffersEndAtGuardPage runs every kernel on matrices whose packed and
// scale bytes end at an inaccessible page, for every tail length of the
// AVX-512 kernel's eight-group blocks, in MatVec and in MatMul.
func TestBuffersEndAtGuardPage(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for groups := 1; groups <= 17; groups++ {
		rows, cols := 3, 32*groups
		p, s := randMatrix(rng, rows, cols, 110, 140, true)
		packed, scales := guarded(t, len(p)), guarded(t, len(s))
		copy(packed, p)
		copy(scales, s)
		x := randVec(rng, 2*cols)
		want := make([]float32, 2*rows)
		runMatVec(genericKernel, want[:rows], p, s, x[:cols])
		runMatVec(genericKernel, want[rows:], p, s, x[cols:])
		for name, k := range kernels() {
			got := make([]float32, rows)
			runMatVec(k, got, packed, scales, x[:cols])
			testkit.RequireSameBitsOrNaN(t, name, got, want[:rows])
			batch := make([]float32, 2*rows)
			matMul(k, batch, rows, packed, scales, x, 2, rows, cols)
			testkit.RequireSameBitsOrNaN(t, name+" matmul", batch, want)
		}
	}
}
