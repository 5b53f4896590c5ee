package mxfp4

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		rows, cols, packed, scales int
		want                       error
	}{
		{2, 64, 64, 4, nil},
		{0, 0, 0, 0, nil},
		{0, 64, 0, 0, nil},
		{-1, 64, 0, 0, ErrShape},
		{2, -32, 0, 0, ErrShape},
		{2, 48, 48, 3, ErrWidth},
		{2, 64, 63, 4, ErrPackedSize},
		{2, 64, 64, 5, ErrScaleSize},
		{2, 64, 64, 2, ErrGroupSize},
		{2, 64, 64, 0, ErrScaleSize},
		{math.MaxInt / 32, 64, 0, 0, ErrShape},
	}
	for _, c := range cases {
		err := Check(c.rows, c.cols, c.packed, c.scales)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Check(%d, %d, %d, %d) = %v, want %v", c.rows, c.cols, c.packed, c.scales, err, c.want)
		}
	}
	var gs *GroupSizeError
	if err := Check(2, 64, 64, 2); !errors.As(err, &gs) || gs.ImpliedGroupSize() != 64 {
		t.Errorf("group-size error %v does not report 64", err)
	} else if !strings.Contains(err.Error(), "group size of 64") {
		t.Errorf("message %q does not name the implied group size", err)
	}
}

func TestCheckShapes(t *testing.T) {
	cases := []struct {
		rows, cols    int
		packed, scale []int
		want          error
		implied       float64
	}{
		{64, 3584, []int{64, 1792}, []int{64, 112}, nil, 0},
		{64, 3584, []int{64, 1792}, []int{64, 56}, ErrGroupSize, 64},
		{64, 3584, []int{64, 1792}, []int{64, 224}, ErrGroupSize, 16},
		{64, 3584, []int{64, 1792}, []int{64, 0}, ErrGroupSize, 0},
		{64, 3584, []int{64, 1792}, []int{63, 112}, ErrShape, 0},
		{64, 3584, []int{65, 1792}, []int{65, 112}, ErrShape, 0},
		{64, 3584, []int{64 * 1792}, []int{64, 112}, ErrShape, 0},
		{64, 3584, []int{64, 1792}, []int{64, 112, 1}, ErrShape, 0},
		{64, 7168, []int{64, 1792}, []int{64, 112}, ErrPackedSize, 0},
		{64, 48, []int{64, 24}, []int{64, 1}, ErrGroupSize, 48},
		{64, 3584, []int{64, -2}, []int{64, 112}, ErrShape, 0},
		{64, 3584, []int{64, math.MaxInt}, []int{64, 112}, ErrShape, 0},
	}
	for i, c := range cases {
		err := CheckShapes(c.rows, c.cols, c.packed, c.scale)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
		var gs *GroupSizeError
		if errors.As(err, &gs) && gs.ImpliedGroupSize() != c.implied {
			t.Errorf("case %d: implied group size %g, want %g", i, gs.ImpliedGroupSize(), c.implied)
		}
	}
}

func TestRowRange(t *testing.T) {
	packed, scales := make([]byte, 3*32), make([]byte, 3*2)
	for i := range packed {
		packed[i] = byte(i)
	}
	for i := range scales {
		scales[i] = byte(100 + i)
	}
	p, s, err := RowRange(packed, scales, 64, 1, 3)
	if err != nil || len(p) != 64 || p[0] != 32 || len(s) != 4 || s[0] != 102 || cap(p) != 64 {
		t.Fatalf("RowRange(1, 3) = %d bytes from %v, %d scales from %v, %v", len(p), p[:1], len(s), s[:1], err)
	}
	for _, c := range [][2]int{{-1, 1}, {2, 1}, {0, 4}} {
		if _, _, err := RowRange(packed, scales, 64, c[0], c[1]); !errors.Is(err, ErrShape) {
			t.Errorf("RowRange(%v): %v", c, err)
		}
	}
	if _, _, err := RowRange(packed, scales, 40, 0, 1); !errors.Is(err, ErrWidth) {
		t.Errorf("width 40: %v", err)
	}
	if _, _, err := RowRange(packed, scales[:5], 64, 0, 3); !errors.Is(err, ErrShape) {
		t.Errorf("short scales: %v", err)
	}
}

func TestDequantizeErrors(t *testing.T) {
	if err := Dequantize(make([]float32, 63), make([]byte, 32), make([]byte, 2), 1, 64); !errors.Is(err, ErrShape) {
		t.Errorf("short dst: %v", err)
	}
	if err := Dequantize(make([]float32, 64), make([]byte, 32), make([]byte, 3), 1, 64); !errors.Is(err, ErrGroupSize) {
		t.Errorf("3 scales: %v", err)
	}
	// Scale 255 gives +0 (not −0) even for negative codes; scale 0 gives
	// E2M1·2^−127 exactly; 254 overflows float32 for |E2M1| >= 2.
	packed := make([]byte, 48)
	for i := range packed {
		packed[i] = 0xf9 // codes 9 (−0.5) and 15 (−6)
	}
	dst := make([]float32, 96)
	st, err := DequantizeStats(dst, packed, []byte{255, 0, 254}, 1, 96)
	if err != nil || st != (Stats{Groups: 3, NaNScaleGroups: 1}) {
		t.Fatalf("%v %+v", err, st)
	}
	for i := range 32 {
		if math.Float32bits(dst[i]) != 0 {
			t.Fatalf("255 group element %d = %#x, want +0", i, math.Float32bits(dst[i]))
		}
	}
	if dst[32] != float32(math.Ldexp(-0.5, -127)) || dst[33] != float32(math.Ldexp(-6, -127)) {
		t.Errorf("scale 0: %v %v", dst[32], dst[33])
	}
	if dst[64] != float32(math.Ldexp(-0.5, 127)) || !math.IsInf(float64(dst[65]), -1) {
		t.Errorf("scale 254: %v %v", dst[64], dst[65])
	}
}
