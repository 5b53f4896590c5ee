//go:build amd64 && !purego

package dot

import (
	"math/rand/v2"
	"testing"
)

// FuzzGemm drives the packed mat-mul (every AVX-512 format with a panel)
// with a shape from the first bytes (rows across the four- and eight-row
// stores and their remainders, columns with and without a tail, position
// counts from gemmMinRows up) and data from a generator seeded by the rest,
// special values included, and holds it to the pure-Go driver bit for bit.
func FuzzGemm(f *testing.F) {
	f.Add(uint8(8), uint8(32), uint8(0), uint64(1), false)
	f.Add(uint8(13), uint8(64), uint8(5), uint64(2), true)
	f.Add(uint8(70), uint8(129), uint8(11), uint64(3), false)
	f.Fuzz(func(t *testing.T, rowsB, colsB, nB uint8, seed uint64, special bool) {
		rows := 1 + int(rowsB%80)
		cols := 16 + int(colsB)*5
		n := gemmMinRows + int(nB%13)
		fuzzLevels(seed, rows, cols, n, special, func(k kernelSet) bool { return k.af.panel != nil },
			func(k kernelSet, w []byte, x []float32) { checkGemm(t, k, w, x, n, rows, cols, rows) })
	})
}

// FuzzMatMulPasses drives the per-pass mat-mul below the packed path at
// every level with a shape from the first bytes (activation rows in every
// remainder of four, so the repeated-row groups run, and columns up to four
// of matMulColBlock's blocks, with and without a tail) and data from a
// generator seeded by the rest, special values included, and holds it to
// the pure-Go driver bit for bit.
func FuzzMatMulPasses(f *testing.F) {
	f.Add(uint8(9), uint8(110), uint8(2), uint64(1), false)
	f.Add(uint8(40), uint8(230), uint8(6), uint64(2), true)
	f.Add(uint8(3), uint8(57), uint8(11), uint64(3), false)
	f.Fuzz(func(t *testing.T, rowsB, colsB, nB uint8, seed uint64, special bool) {
		rows := 1 + int(rowsB%48)
		cols := 16 + int(colsB)*9
		n := 2 + int(nB%15)
		fuzzLevels(seed, rows, cols, n, special, func(kernelSet) bool { return true },
			func(k kernelSet, w []byte, x []float32) { requireMatMulAsGeneric(t, k, w, x, n, rows, cols) })
	})
}

// fuzzLevels hands check, for every kernel set the CPU runs and use accepts,
// a rows×cols weight matrix and n activation rows from a generator seeded by
// seed: special values when special is set, else rows that nearly cancel.
func fuzzLevels(seed uint64, rows, cols, n int, special bool, use func(kernelSet) bool, check func(k kernelSet, w []byte, x []float32)) {
	r := rand.New(rand.NewPCG(seed, uint64(rows*cols*n)))
	for _, k := range kernelSets() {
		if !k.ok || !use(k) {
			continue
		}
		w := randW(r, k.f, rows, cols, 0, special)
		x := randX(r, n*cols, special)
		if !special {
			cancelRows(k.f, w, x, n, rows, cols)
		}
		check(k, w, x)
	}
}
