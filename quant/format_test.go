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

// The registry of §6.1, transcribed.
var specRegistry = []struct {
	ord    uint8
	name   string
	status Status
}{
	{0, "f32", StatusImplemented}, {1, "int8-row", StatusImplemented}, {2, "int4-row", StatusImplemented},
	{3, "int2-row", StatusReserved}, {4, "int4-grouped", StatusImplemented}, {5, "int3-g64", StatusReserved},
	{6, "e8-iq3-lattice", StatusReserved}, {7, "mxfp4", StatusImplemented}, {8, "fp8-e4m3-b128", StatusImplemented},
	{16, "bf16", StatusImplemented}, {17, "f16", StatusImplemented}, {18, "lossless12", StatusImplemented}, {32, "mxfp4-cfs1", StatusImplemented},
	{33, "int4-row-cfs1", StatusImplemented}, {34, "int4-grouped-cfs1", StatusImplemented},
	{35, "int4-rans256-g0", StatusUnsupported}, {36, "mxfp4-scale-cfs1", StatusImplemented},
}

func TestRegistry(t *testing.T) {
	if got := len(Formats()); got != len(specRegistry) {
		t.Fatalf("%d formats registered, want %d", got, len(specRegistry))
	}
	for _, r := range specRegistry {
		f := Format(r.ord)
		if f.String() != r.name || f.Status() != r.status || !f.Known() {
			t.Errorf("ordinal %d: %q %v, want %q %v", r.ord, f, f.Status(), r.name, r.status)
		}
		p, err := ParseFormat(r.name)
		if err != nil || p != f {
			t.Errorf("ParseFormat(%q) = %v, %v", r.name, p, err)
		}
		if f.Coded() != (r.ord >= 32) {
			t.Errorf("%v.Coded() = %v", f, f.Coded())
		}
	}
	for _, n := range []string{"", "MXFP4", "fp8", "int4", " f32"} {
		if _, err := ParseFormat(n); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("ParseFormat(%q) err = %v", n, err)
		}
	}
	if Format(9).Known() || Format(9).String() != "format(9)" || Format(9).Status() != StatusUnknown {
		t.Error("unassigned ordinal 9")
	}
	if MXFP4CFS1.Base() != MXFP4 || Int4GroupedCFS1.Base() != Int4Grouped || Int4RowCFS1.Base() != Int4Row {
		t.Error("coded base formats")
	}
}

func TestExpectedBytes(t *testing.T) {
	// [O, I] = [300, 200]: every branch, written out by hand.
	const O, I = 300, 200
	cases := []struct {
		f    Format
		gs   int
		w, s int64
	}{
		{F32, 0, 4 * O * I, 0}, {BF16, 0, 2 * O * I, 0}, {F16, 0, 2 * O * I, 0},
		{Int8Row, 0, O * I, 4 * O}, {Int4Row, 0, O * 100, 4 * O}, {Int4Grouped, 48, O * 100, 4 * O * 5},
		{Int4Grouped, 256, O * 100, 4 * O}, {Int2Row, 0, O * 50, 4 * O}, {Int3G64, 0, 24 * O * 4, 4 * O * 4},
		{E8IQ3Lattice, 0, 98 * O * 1, 4}, {FP8E4M3B128, 0, O * I, 4 * 3 * 2},
	}
	for _, c := range cases {
		w, err1 := WeightBytes(c.f, O, I, c.gs)
		s, err2 := ScaleBytes(c.f, O, I, c.gs)
		if err1 != nil || err2 != nil || w != c.w || s != c.s {
			t.Errorf("%v gs=%d: (%d, %d, %v, %v), want (%d, %d)", c.f, c.gs, w, s, err1, err2, c.w, c.s)
		}
	}
	if w, _ := WeightBytes(Int4Row, 3, 7, 0); w != 12 {
		t.Errorf("int4-row odd I: %d", w)
	}
	if w, err := WeightBytes(MXFP4, 3, 64, 0); err != nil || w != 96 {
		t.Errorf("mxfp4 weight: %d %v", w, err)
	}
	if s, err := ScaleBytes(MXFP4, 3, 64, 0); err != nil || s != 6 {
		t.Errorf("mxfp4 scale: %d %v", s, err)
	}
	for _, f := range []Format{MXFP4} {
		if _, err := WeightBytes(f, 3, 48, 0); err == nil {
			t.Errorf("%v with I %% 32 != 0 accepted", f)
		}
	}
	for _, f := range Formats() {
		_, errW := WeightBytes(f, 2, 64, 64)
		_, errS := ScaleBytes(f, 2, 64, 64)
		if f.Coded() != (errW != nil) || f.Coded() != (errS != nil) {
			t.Errorf("%v: coded %v but errors %v %v", f, f.Coded(), errW, errS)
		}
	}
	if _, err := WeightBytes(Format(99), 1, 1, 0); !errors.Is(err, ErrUnknownFormat) {
		t.Error(err)
	}
	if _, err := ScaleBytes(Int4Grouped, 1, 1, 20); !errors.Is(err, ErrGroupSize) {
		t.Error(err)
	}
	if _, err := WeightBytes(F32, -1, 1, 0); !errors.Is(err, ErrShape) {
		t.Error(err)
	}
}

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
