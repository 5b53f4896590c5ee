package rans

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/fixtures"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
)

// order0Bits is the order-0 entropy of the nibbles of data, in bits per
// nibble.
func order0Bits(data []byte) float64 {
	var c [16]float64
	for _, b := range data {
		c[b&15]++
		c[b>>4]++
	}
	m := float64(2 * len(data))
	h := 0.0
	for _, v := range c {
		if v > 0 {
			h -= v / m * math.Log2(v/m)
		}
	}
	return h
}

// bitsPerWeight is the record size in bits per 4-bit weight.
func bitsPerWeight(rec, data []byte) float64 { return 8 * float64(len(rec)) / float64(2*len(data)) }

func gaussianMatrix(seed uint64, rows, cols int) []float32 {
	rng := rand.New(rand.NewPCG(seed, seed))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return w
}

// TestBitsPerWeight measures bits per weight of the container on Gaussian
// weights quantised by this library (int4-row, absmax/7 per row; mxfp4) and
// checks the coder stays within 0.5% plus the header of the order-0 entropy.
// Run with -v to see the figures.
func TestBitsPerWeight(t *testing.T) {
	const rows, cols = 512, 2048
	w := gaussianMatrix(3, rows, cols)
	for _, f := range []quant.Format{quant.Int4Row, quant.MXFP4} {
		q, _, err := quant.Quantize(f, w, rows, cols, 0)
		require.NoError(t, err)
		rec, err := Encode(q)
		require.NoError(t, err)
		h := order0Bits(q)
		got := bitsPerWeight(rec, q)
		t.Logf("%s Gaussian [%d, %d]: %.4f bits/weight (order-0 entropy %.4f), record/raw %.4f", f, rows, cols, got, h, float64(len(rec))/float64(len(q)))
		require.Less(t, got, h*1.005+8*float64(9+32+8)/float64(2*len(q)))
	}
}

// TestRealMXFP4 codes the released checkpoint's MXFP4 sample, reports bits
// per weight, and runs every truncation and every single-bit flip of the
// first 4 rows' record: each is refused or decodes exactly to the sample.
func TestRealMXFP4(t *testing.T) {
	raw, err := os.ReadFile(fixtures.Path(t, "mxfp4.json"))
	require.NoError(t, err)
	var fx struct {
		Packed struct{ Data []int } `json:"packed"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	packed := make([]byte, len(fx.Packed.Data))
	for i, v := range fx.Packed.Data {
		packed[i] = byte(v)
	}
	rec, err := Encode(packed)
	require.NoError(t, err)
	got := make([]byte, len(packed))
	require.NoError(t, DecodeInto(got, rec))
	require.Equal(t, packed, got)
	t.Logf("real K3 MXFP4 (%d bytes): %.4f bits/weight, order-0 entropy %.4f, record/raw %.4f",
		len(packed), bitsPerWeight(rec, packed), order0Bits(packed), float64(len(rec))/float64(len(packed)))
	require.Less(t, bitsPerWeight(rec, packed), 3.8)

	sample := packed[:4*1792]
	srec, err := Encode(sample)
	require.NoError(t, err)
	for k := range len(srec) {
		_, err := decodeOutcome(t, srec[:k], len(sample))
		require.ErrorIs(t, err, ErrCorrupt, "prefix %d", k)
	}
	refused := 0
	for bit := range 8 * len(srec) {
		mut := append([]byte(nil), srec...)
		mut[bit/8] ^= 1 << (bit % 8)
		out, err := decodeOutcome(t, mut, len(sample))
		if err != nil {
			refused++
			continue
		}
		if !bytes.Equal(out, sample) {
			t.Fatalf("bit %d flipped: decodes to other bytes undetected", bit)
		}
	}
	t.Logf("real MXFP4 sample record of %d bytes: all %d truncations and %d of %d bit flips refused, the rest decode exactly",
		len(srec), len(srec), refused, 8*len(srec))
}

// TestTiedFrequenciesBlindSpot shows why Encode breaks frequency ties: with
// SPEC §6.9.1's tied table (package cfs1's encoder) some single-bit flips of
// the real MXFP4 sample decode to different bytes undetected; with Encode's
// table none do (TestRealMXFP4).
func TestTiedFrequenciesBlindSpot(t *testing.T) {
	raw, err := os.ReadFile(fixtures.Path(t, "mxfp4.json"))
	require.NoError(t, err)
	var fx struct {
		Packed struct{ Data []int } `json:"packed"`
	}
	require.NoError(t, json.Unmarshal(raw, &fx))
	sample := make([]byte, 4*1792)
	for i := range sample {
		sample[i] = byte(fx.Packed.Data[i])
	}
	rec, err := cfs1.Encode(sample, cfs1.ModeNibble)
	require.NoError(t, err)
	escapes := 0
	for bit := 8 * headerLen; bit < 8*len(rec); bit++ {
		mut := append([]byte(nil), rec...)
		mut[bit/8] ^= 1 << (bit % 8)
		out := make([]byte, len(sample))
		if DecodeInto(out, mut) == nil && !bytes.Equal(out, sample) {
			escapes++
		}
	}
	t.Logf("tied table: %d of %d flips escape the seal", escapes, 8*len(rec))
	require.Positive(t, escapes)
}

// TestEncodeMatchesSpecWithoutTies: where the SPEC table has no ties (and
// always for byte records) Encode's records are package cfs1's, bit for bit.
func TestEncodeMatchesSpecWithoutTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	same := 0
	for n := range 300 {
		data := gaussianInt4(rng, n*7, 2.2)
		a, err := Encode(data)
		require.NoError(t, err)
		b, err := cfs1.Encode(data, cfs1.ModeNibble)
		require.NoError(t, err)
		if f, ok := normalise(data, cfs1.ModeNibble); ok && len(data) > 0 {
			if d, _ := distinct(f); d == f {
				require.Equal(t, b, a, "n=%d", n)
				same++
			}
		}
		bb := skewBytes(rng, n*5)
		x, err := EncodeBytes(bb)
		require.NoError(t, err)
		y, err := cfs1.Encode(bb, cfs1.ModeByte)
		require.NoError(t, err)
		require.Equal(t, y, x)
	}
	require.Positive(t, same)
}

func TestDistinct(t *testing.T) {
	var f [256]uint32
	f[0], f[1], f[2], f[3], f[4] = 1, 1, 1, 7, 4086
	d, ok := distinct(f)
	require.True(t, ok)
	require.Equal(t, []uint32{1, 2, 3, 7, 4083}, d[:5])
	var g [256]uint32
	g[0], g[1], g[2] = 2048, 1024, 1024
	d, ok = distinct(g)
	require.True(t, ok)
	require.Equal(t, []uint32{2047, 1024, 1025}, d[:3])
	var h [256]uint32
	h[0], h[1] = 2048, 2048
	_, ok = distinct(h)
	require.False(t, ok, "two symbols of 2048 cannot be untied")
}
