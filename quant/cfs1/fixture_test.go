package cfs1

import (
	"bytes"
	"math"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// entropyBytes is the order-0 entropy of the symbols, in bytes.
func entropyBytes(data []byte, mode byte) float64 {
	m := len(data)
	if mode == ModeNibble {
		m *= 2
	}
	var c [256]float64
	for j := range m {
		c[symbolAt(data, mode, j)]++
	}
	h := 0.0
	for _, v := range c {
		if v > 0 {
			h -= v * math.Log2(v/float64(m))
		}
	}
	return h / 8
}

// TestRealK3Bytes codes the released checkpoint's MXFP4 sample (64 rows ×
// 3584 of an expert's w1) and checks the sizes against the order-0 entropy
// and the savings §6.10 reports (nibbles ≈ 6.2%, scale bytes ≈ 90%).
func TestRealK3Bytes(t *testing.T) {
	fx := testkit.MXFP4(t)
	for _, c := range []struct {
		name           string
		data           []byte
		mode           byte
		minSave, maxSv float64
	}{
		{"packed nibbles", fx.PackedBytes, ModeNibble, 0.04, 0.08},
		{"E8M0 scales", fx.ScaleBytes, ModeByte, 0.80, 0.95},
	} {
		rec, err := Encode(c.data, c.mode)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(rec, len(c.data))
		if err != nil || !bytes.Equal(back, c.data) {
			t.Fatalf("%s: round trip: %v", c.name, err)
		}
		h := entropyBytes(c.data, c.mode)
		save := 1 - float64(len(rec))/float64(len(c.data))
		t.Logf("%s: %d → %d bytes (saves %.2f%%), order-0 entropy %.0f bytes", c.name, len(c.data), len(rec), 100*save, h)
		// rANS with 12-bit frequencies stays within 1% plus the header of
		// the entropy.
		if float64(len(rec)) > h*1.01+float64(17+2*alphabet(c.mode)) {
			t.Errorf("%s: %d bytes, entropy bound %.0f", c.name, len(rec), h)
		}
		if save < c.minSave || save > c.maxSv {
			t.Errorf("%s: saves %.3f, want within [%.2f, %.2f]", c.name, save, c.minSave, c.maxSv)
		}
	}
}
