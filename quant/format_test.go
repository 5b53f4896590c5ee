package quant

import (
	"errors"
	"testing"
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
