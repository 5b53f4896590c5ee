package rans

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/quant/cfs1"
)

// BenchmarkDecode reports decoded bytes per second (b.SetBytes is the
// decoded length: one byte is two int4/MXFP4 weights) for this package's
// decoder and package cfs1's plain loop, on one core, for 1 MiB of int4
// codes of a quantised Gaussian (about 2.9 bits per weight).
func BenchmarkDecode(b *testing.B) {
	data := gaussianInt4(rand.New(rand.NewPCG(9, 9)), 1<<20, 2.2)
	rec, err := Encode(data)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, len(data))
	b.Run("fast", func(b *testing.B) {
		var d Decoder
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := d.DecodeInto(dst, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := cfs1.DecodeInto(dst, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	data := gaussianInt4(rand.New(rand.NewPCG(9, 9)), 1<<20, 2.2)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Encode(data); err != nil {
			b.Fatal(err)
		}
	}
}
