package checkpoint_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
)

// TestMeasureLossless12Fixtures measures every bf16 matrix of the trunk,
// the embedding and the head of each fixture model, and checks each
// measurement against the encoding itself: the encoder writes exactly the
// bytes measured, the decoder gives back every weight, and the kernels give
// the bf16 matrix's bits. The per-tensor table is logged (go test -v).
func TestMeasureLossless12Fixtures(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			stats, err := checkpoint.MeasureLossless12(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(stats) == 0 {
				t.Fatal("no bf16 matrix measured")
			}
			ck, err := safetensors.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			r := rand.New(rand.NewPCG(27, 3))
			var tot lossless12.Stats
			var hsum float64
			var rep strings.Builder
			for _, s := range stats {
				fmt.Fprintf(&rep, "\n%-60s %v", s.Name, s.Stats)
				tot.Bytes += s.Bytes
				tot.BF16Bytes += s.BF16Bytes
				tot.Escapes += s.Escapes
				hsum += s.ExponentEntropy * float64(s.Weights())
				tn, ok := ck.Tensor(s.Name)
				if !ok {
					t.Fatalf("%s measured but not in the checkpoint", s.Name)
				}
				w, err := ck.Read(tn)
				if err != nil {
					t.Fatal(err)
				}
				enc, err := lossless12.Encode(s.Rows, s.Cols, w)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(enc)) != s.Bytes {
					t.Fatalf("%s: measured %d bytes, encoded %d", s.Name, s.Bytes, len(enc))
				}
				m, err := lossless12.Open(enc)
				if err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
				row := make([]byte, 2*s.Cols)
				for i := range s.Rows {
					m.DecodeRowBF16(row, i)
					if !bytes.Equal(row, w[2*i*s.Cols:2*(i+1)*s.Cols]) {
						t.Fatalf("%s row %d does not round-trip", s.Name, i)
					}
				}
				ref, err := quant.NewBF16(s.Rows, s.Cols, w)
				if err != nil {
					t.Fatal(err)
				}
				x := testkit.Gaussian(r, s.Cols, 1)
				want, got := make([]float32, s.Rows), make([]float32, s.Rows)
				ref.MatVec(want, x)
				m.MatVec(got, x)
				testkit.RequireSameBits(t, s.Name, got, want)
			}
			tot.Rows, tot.Cols = 1, int(tot.BF16Bytes/2)
			t.Logf("%d matrices, %d weights: %.3f bits/weight, %.4f× bf16, escape rate %.4f%%, exponent entropy %.3f bits (mean)%s",
				len(stats), tot.Weights(), tot.BitsPerWeight(), tot.Ratio(), 100*tot.EscapeRate(), hsum/float64(tot.Weights()), rep.String())
			if tot.Ratio() >= 0.8 {
				t.Errorf("the fixture's bf16 matrices cost %.4f× bf16 in lossless12", tot.Ratio())
			}
		})
	}
}
