package rans

import (
	"testing"

	"github.com/k3-project/k3/quant/cfs1"
	"github.com/stretchr/testify/require"
)

// FuzzDecode feeds arbitrary records to the decoder with destinations of the
// declared size and of a fixed 64 bytes: it must never panic, read or write
// out of bounds, and must agree with package cfs1's plain decoder on
// acceptance and output. Seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, rec := range corpus(f) {
		if len(rec) < 600 {
			f.Add(rec)
		}
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		sizes := []int{64}
		if n, err := DecodedLen(rec); err == nil && n <= 1<<16 {
			sizes = append(sizes, n)
		}
		var d Decoder
		for _, n := range sizes {
			got := make([]byte, n)
			err := d.DecodeInto(got, rec[:len(rec):len(rec)])
			want := make([]byte, n)
			wn, werr := cfs1.DecodeInto(want, rec)
			if werr == nil && wn != n {
				werr = ErrLength
			}
			require.Equal(t, werr == nil, err == nil, "n=%d: decoder says %v, reference %v", n, err, werr)
			if err == nil {
				require.Equal(t, want, got, "n=%d: outputs differ", n)
				again, err := Encode(got)
				require.NoError(t, err)
				require.NoError(t, d.DecodeInto(got, again), "re-encoded record")
				require.Equal(t, want, got, "re-encoded record does not round-trip")
			}
		}
	})
}
