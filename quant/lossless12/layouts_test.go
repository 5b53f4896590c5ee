package lossless12

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// layoutCost is the size in bits of a fixed-rate layout of the bf16 matrix
// w ([rows, cols], little-endian) built like this package's but with other
// numbers: blocks of block weights, each with a base byte, a sign-and-
// mantissa byte per weight and a code of bits bits naming one of the
// 2^bits − 1 exponents of a window whose top is the block's largest (the
// last code an escape, its exponent a byte in the row's escape area), every
// row padded to the widest row. With hybrid set, a block whose exponents
// span at most eight values spends 3 bits a weight and has no escapes, any
// other block the bits above, each block one more bit to say which. It
// returns the bits, the share of blocks whose exponents span at most eight
// values, the share of weights that escape and of blocks with an escape.
func layoutCost(rows, cols int, w []byte, block, bits int, hybrid bool) (total int64, fit8, escRate, escBlocks float64) {
	window := 1<<bits - 1
	var fits, blocks, allEscapes, blocksEscaping int64
	widest := int64(0)
	for r := range rows {
		row := w[2*r*cols : 2*(r+1)*cols]
		var rowBits, escapes int64
		for b0 := 0; b0 < cols; b0 += block {
			b1 := min(b0+block, cols)
			emin, emax := 255, 0
			for c := b0; c < b1; c++ {
				e := exponent(binary.LittleEndian.Uint16(row[2*c:]))
				emin, emax = min(emin, e), max(emax, e)
			}
			blocks++
			n := int64(b1 - b0)
			rowBits += 8 + 8*n
			if emax-emin <= 7 {
				fits++
			}
			if hybrid {
				rowBits++
				if emax-emin <= 7 {
					rowBits += 3 * n
					continue
				}
			}
			rowBits += int64(bits) * n
			base := min(max(emax-(window-1), 0), 255-(window-1))
			before := escapes
			for c := b0; c < b1; c++ {
				if e := exponent(binary.LittleEndian.Uint16(row[2*c:])); e < base || e > base+window-1 {
					escapes++
				}
			}
			if escapes > before {
				blocksEscaping++
			}
		}
		// Codes pack to whole bytes per row.
		rowBits = (rowBits+7)/8*8 + 8*escapes
		widest = max(widest, rowBits)
		allEscapes += escapes
	}
	nb := float64(max(blocks, 1))
	return HeaderSize*8 + int64(rows)*widest, float64(fits) / nb,
		float64(allEscapes) / float64(max(rows*cols, 1)), float64(blocksEscaping) / nb
}

// BenchmarkDenserLayouts prints what fixed-rate layouts of this kind cost
// on Gaussian weights of the widths of K3 and of the perf checkpoint
// (§6.11.3's matrices): the 3-bit code (seven exponents and an escape, the
// format's own at blocks of 64) and a 3/4-bit hybrid, each with blocks of
// 32, 64 and 128 weights, and the first layout's 4-bit code, in bits per
// weight, with the share of blocks whose exponents span at most eight
// values and the 3-bit code's escapes. Issue 27 asks for the trunk at ≤
// 0.77× its bf16 bytes in the FLOOR benchmark, under 12.0 bits a weight.
// The model of the layouts is checked against Measure on the format's own
// numbers before anything is printed.
//
//	go test -run '^$' -bench DenserLayouts -benchtime 1x ./quant/lossless12
func BenchmarkDenserLayouts(b *testing.B) {
	for b.Loop() {
		for _, tc := range []struct {
			rows, cols int
			s          float64
		}{{256, 7168, 0.02}, {512, 2048, 0.006}} {
			w := gaussianBF16(rand.New(rand.NewPCG(5, 6)), tc.rows, tc.cols, tc.s)
			weights := float64(tc.rows * tc.cols)
			st, err := Measure(tc.rows, tc.cols, w)
			if err != nil {
				b.Fatal(err)
			}
			if got, _, _, _ := layoutCost(tc.rows, tc.cols, w, BlockSize, IndexBits, false); got != 8*st.Bytes {
				b.Fatalf("[%d, %d]: the layout model gives lossless12 %d bits, Measure %d", tc.rows, tc.cols, got, 8*st.Bytes)
			}
			first, _, _, _ := layoutCost(tc.rows, tc.cols, w, 64, 4, false)
			fmt.Printf("[%d, %d] σ=%g: lossless12 %.3f bits/weight (the first layout's 4-bit code: %.3f)\n", tc.rows, tc.cols, tc.s, st.BitsPerWeight(), float64(first)/weights)
			for _, block := range []int{32, 64, 128} {
				three, fit, esc, escBlocks := layoutCost(tc.rows, tc.cols, w, block, 3, false)
				hybrid, _, _, _ := layoutCost(tc.rows, tc.cols, w, block, 4, true)
				fmt.Printf("  blocks of %3d: %.1f%% span ≤ 8 exponents; 3-bit code %.3f bits/weight (escapes %.2f%% of weights, in %.0f%% of blocks), 3/4-bit hybrid %.3f\n",
					block, 100*fit, float64(three)/weights, 100*esc, 100*escBlocks, float64(hybrid)/weights)
			}
		}
	}
}
