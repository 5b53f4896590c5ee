package lossless12

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkScratchBigDecode(b *testing.B) {
	for _, rows := range []int{256, 4096} {
		cols := 2048
		m := mustOpen(b, rows, cols, gaussianBF16(rand.New(rand.NewPCG(1, 2)), rows, cols, 0.02))
		buf := make([]byte, 2*cols*m.chunkRows())
		b.Run(map[int]string{256: "cache", 4096: "memory"}[rows], func(b *testing.B) {
			for b.Loop() {
				cr := m.chunkRows()
				for r0 := 0; r0 < rows; r0 += cr {
					m.decodeRows(buf, r0, min(r0+cr, rows))
				}
			}
			b.ReportMetric(float64(rows*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		})
	}
}
