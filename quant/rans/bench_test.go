package rans

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
)

// BenchmarkDecode reports decoded bytes per second (b.SetBytes is the
// decoded length: one byte is two int4/MXFP4 weights) for this package's
// decoder and package cfs1's plain loop, for 1 MiB of int4 codes of a
// quantised Gaussian (about 3 bits per weight). Run it with -cpu 1; the
// cpu-MB/s metric divides by user CPU time instead of wall time, the steady
// per-core figure on a shared machine.
func BenchmarkDecode(b *testing.B) {
	mx, _, err := quant.Quantize(quant.MXFP4, gaussianMatrix(5, 512, 4096), 512, 4096, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"int4", gaussianInt4(rand.New(rand.NewPCG(9, 9)), 1<<20, 2.2)},
		{"mxfp4", mx},
	} {
		rec, err := Encode(c.data)
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]byte, len(c.data))
		b.Run(c.name+"/fast", func(b *testing.B) {
			var d Decoder
			cpuLoop(b, len(c.data), func() {
				if err := d.DecodeInto(dst, rec); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(c.name+"/reference", func(b *testing.B) {
			cpuLoop(b, len(c.data), func() {
				if _, err := cfs1.DecodeInto(dst, rec); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	data := gaussianInt4(rand.New(rand.NewPCG(9, 9)), 1<<20, 2.2)
	cpuLoop(b, len(data), func() {
		if _, err := Encode(data); err != nil {
			b.Fatal(err)
		}
	})
}

// cpuLoop runs fn per iteration with b.SetBytes(n) and reports cpu-MB/s.
func cpuLoop(b *testing.B, n int, fn func()) {
	b.SetBytes(int64(n))
	c0, ok := cpuTime()
	for b.Loop() {
		fn()
	}
	if c1, _ := cpuTime(); ok && c1 > c0 {
		b.ReportMetric(float64(b.N)*float64(n)/(c1-c0).Seconds()/1e6, "cpu-MB/s")
	}
}
