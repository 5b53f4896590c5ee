package quant

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant/cfs1"
)

func TestCodedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range []fmtCase{{MXFP4, 0}, {Int4Row, 0}, {Int4Grouped, 32}, {Int4Grouped, 96}} {
		for _, sh := range [][2]int{{3, 64}, {17, 352}, {40, 1024}} {
			rows, cols := sh[0], sh[1]
			if c.f != MXFP4 {
				cols++ // odd widths for the integer formats
			}
			if c.f == Int4Grouped && cols <= c.gs {
				continue // one group per row: the bytes are int4-row's (§6.7 step 5)
			}
			t.Run(fmt.Sprintf("%v/%dx%d", c, rows, cols), func(t *testing.T) {
				m, wb, sb := quantized(t, rng, c, rows, cols)
				cf, rec, err := EncodeCoded(c.f, wb)
				if err != nil || !cf.Coded() || cf.Base() != c.f {
					t.Fatalf("EncodeCoded: %v %v", cf, err)
				}
				sdt := "F32"
				if c.f == MXFP4 {
					sdt = "F8_E8M0"
				}
				f, gs, dec, err := ResolveCoded("w", rows, cols, "U8", rec, sd(sdt, int64(len(sb))), cf.String())
				if err != nil || f != c.f || gs != c.gs || !bytes.Equal(dec, wb) {
					t.Fatalf("ResolveCoded: (%v, %d, %v), equal bytes %v", f, gs, err, bytes.Equal(dec, wb))
				}
				m2, err := New(f, rows, cols, gs, dec, sb)
				if err != nil {
					t.Fatal(err)
				}
				x := wideFloats(rng, cols)
				y1, y2 := make([]float32, rows), make([]float32, rows)
				m.MatVec(y1, x)
				m2.MatVec(y2, x)
				testkit.RequireSameBitsOrNaN(t, "decoded matrix", y2, y1)
				if c.f == MXFP4 {
					srec, err := EncodeScaleRecord(sb)
					if err != nil {
						t.Fatal(err)
					}
					back, err := DecodeScaleRecord("w_scale", rows, cols, srec, "mxfp4-scale-cfs1")
					if err != nil || !bytes.Equal(back, sb) {
						t.Fatalf("scale record: %v", err)
					}
				}
			})
		}
	}
}

func TestCodedRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	_, wb, sb := quantized(t, rng, fmtCase{MXFP4, 0}, 8, 256)
	_, rec, _ := EncodeCoded(MXFP4, wb)
	s := sd("U8", int64(len(sb)))
	var (
		dte *DTypeError
		wse *WeightSizeError
		nie *NotImplementedError
		unk *ErrStampUnknown
		mis *ErrStampMismatch
		sse *ScaleSizeError
	)
	if _, _, _, err := ResolveCoded("w", 8, 256, "F32", rec, s, "mxfp4-cfs1"); !errors.As(err, &dte) {
		t.Errorf("dtype: %v", err)
	}
	if _, _, _, err := ResolveCoded("w", 8, 288, "U8", rec, s, "mxfp4-cfs1"); !errors.As(err, &wse) || wse.Got != 1024 || wse.Want[0].Bytes != 1152 {
		t.Errorf("decoded length: %v", err)
	}
	huge := append([]byte(nil), rec...)
	binary.LittleEndian.PutUint32(huge[5:], 0xfffffff0)
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", huge, s, "mxfp4-cfs1"); !errors.As(err, &wse) {
		t.Errorf("huge declared length: %v", err)
	}
	bad := append([]byte(nil), rec...)
	bad[len(bad)-1] ^= 0x40
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", bad, s, "mxfp4-cfs1"); !errors.Is(err, cfs1.ErrCorrupt) {
		t.Errorf("corrupt record: %v", err)
	}
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", rec[:len(rec)-1], s, "mxfp4-cfs1"); !errors.Is(err, cfs1.ErrCorrupt) {
		t.Errorf("truncated record: %v", err)
	}
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", rec, s, "int4-rans256-g0"); !errors.As(err, &nie) {
		t.Errorf("rans: %v", err)
	}
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", rec, s, "mxfp4"); !errors.Is(err, ErrCoded) {
		t.Errorf("uncoded stamp: %v", err)
	}
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", rec, s, "cfs1"); !errors.As(err, &unk) {
		t.Errorf("unknown stamp: %v", err)
	}
	// Stamped int4-row-cfs1 but the scales are E8M0: the decoded bytes say
	// mxfp4.
	if _, _, _, err := ResolveCoded("w", 8, 256, "U8", rec, s, "int4-row-cfs1"); !errors.As(err, &mis) {
		t.Errorf("base mismatch: %v", err)
	}
	srec, _ := EncodeScaleRecord(sb)
	if _, err := DecodeScaleRecord("s", 8, 256, srec, "mxfp4"); !errors.Is(err, ErrCoded) {
		t.Errorf("scale stamp: %v", err)
	}
	if _, err := DecodeScaleRecord("s", 8, 512, srec, "mxfp4-scale-cfs1"); !errors.As(err, &sse) {
		t.Errorf("scale length: %v", err)
	}
	if _, err := DecodeScaleRecord("s", 8, 256, rec, "mxfp4-scale-cfs1"); err == nil {
		t.Errorf("nibble record accepted as scales")
	}
	if _, _, err := EncodeCoded(Int8Row, wb); !errors.Is(err, ErrCoded) {
		t.Errorf("int8 container: %v", err)
	}
}
