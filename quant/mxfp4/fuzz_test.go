package mxfp4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// FuzzMatVec feeds arbitrary bytes and shapes: every entry point must return
// an error or a result, never panic; on valid geometry the assembly and the
// pure-Go kernel must agree bit for bit, in MatVec and in MatMul, and
// Dequantize must succeed.
func FuzzMatVec(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(0), []byte{0x21, 0x43, 0x65, 0x87, 0xa9, 0xcb, 0xed, 0x0f, 1, 2, 3, 4, 5, 6, 7, 8}, []byte{127}, []byte{0, 0, 128, 63})
	f.Add(uint8(2), uint8(2), uint8(0), make([]byte, 64), []byte{0, 255, 254, 1}, []byte{0, 0, 192, 127, 0, 0, 128, 255})
	f.Add(uint8(3), uint8(1), uint8(5), []byte{0xff}, []byte{255, 255}, []byte{1})
	f.Fuzz(func(t *testing.T, rows, groups, skew uint8, packed, scales, xbytes []byte) {
		r, cols := int(rows%16), 32*int(groups%8)
		// skew perturbs the buffer lengths so that invalid geometry is
		// exercised as often as valid.
		switch skew % 4 {
		case 1:
			packed = packed[:len(packed)/2]
		case 2:
			cols += int(skew % 31)
		}
		if need := r * cols / 2; skew%4 == 0 && len(packed) < need {
			packed = append(packed, make([]byte, need-len(packed))...)
		}
		if need := r * max(cols, 0) / 32; skew%4 == 0 && len(scales) < need {
			scales = append(scales, make([]byte, need-len(scales))...)
		}
		if skew%4 == 0 {
			packed = packed[:min(len(packed), r*cols/2)]
			scales = scales[:min(len(scales), r*cols/32)]
		}
		x := make([]float32, cols)
		for i := range x {
			if 4*i+4 <= len(xbytes) {
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(xbytes[4*i:]))
			} else {
				x[i] = float32(i%7) - 3
			}
		}
		dst := make([]float32, r)
		st, err := MatVecStats(dst, packed, scales, x)
		geomErr := Check(r, cols, len(packed), len(scales))
		if (err == nil) != (geomErr == nil) {
			t.Fatalf("MatVecStats error %v but Check %v", err, geomErr)
		}
		deq := make([]float32, max(r*cols, 0))
		if derr := Dequantize(deq, packed, scales, r, cols); (derr == nil) != (geomErr == nil) {
			t.Fatalf("Dequantize error %v but Check %v", derr, geomErr)
		}
		if err != nil {
			for _, s := range []error{ErrShape, ErrWidth, ErrPackedSize, ErrScaleSize, ErrGroupSize} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v matches no sentinel", err)
		}
		if want := ScanScales(scales); st != want {
			t.Fatalf("stats %+v, want %+v", st, want)
		}
		// A second activation row, so MatMul runs its two-row kernel.
		x2 := make([]float32, cols)
		for i, v := range x {
			x2[len(x)-1-i] = -v
		}
		dst2 := make([]float32, r)
		runMatVec(genericKernel, dst2, packed, scales, x2)
		for name, k := range kernels() {
			got := make([]float32, r)
			runMatVec(k, got, packed, scales, x)
			testkit.RequireSameBitsOrNaN(t, name, got, dst)
			batch := make([]float32, 2*r)
			if st2 := matMul(k, batch, r, packed, scales, append(x, x2...), 2, r, cols); st2 != st {
				t.Fatalf("%s: MatMul stats %+v, want %+v", name, st2, st)
			}
			testkit.RequireSameBitsOrNaN(t, name+" matmul row 0", batch[:r], dst)
			testkit.RequireSameBitsOrNaN(t, name+" matmul row 1", batch[r:], dst2)
			// Four rows (x, x2, x2, x), so MatMul runs its four-row kernel
			// where the activations fit it.
			batch = make([]float32, 4*r)
			if st4 := matMul(k, batch, r, packed, scales, slices.Concat(x, x2, x2, x), 4, r, cols); st4 != st {
				t.Fatalf("%s: MatMul stats %+v, want %+v", name, st4, st)
			}
			for i, want := range [][]float32{dst, dst2, dst2, dst} {
				testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%s matmul of 4, row %d", name, i), batch[i*r:(i+1)*r], want)
			}
			// gemmMinRows+3 rows alternating x and x2 by a pattern of the
			// input, so MatMul runs its packed form where a kernel has one,
			// with leftover rows.
			n := gemmMinRows + 3
			xs := make([]float32, 0, n*cols)
			wants := make([][]float32, n)
			for i := range n {
				if skew>>(i%8)&1 == 0 {
					xs, wants[i] = append(xs, x...), dst
				} else {
					xs, wants[i] = append(xs, x2...), dst2
				}
			}
			batch = make([]float32, n*r)
			if stn := matMul(k, batch, r, packed, scales, xs, n, r, cols); stn != st {
				t.Fatalf("%s: MatMul of %d stats %+v, want %+v", name, n, stn, st)
			}
			for i, want := range wants {
				testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%s matmul of %d, row %d", name, n, i), batch[i*r:(i+1)*r], want)
			}
		}
		if _, err := MatMul(make([]float32, 2*r), r, packed, scales, append(x, x...), 2, r, cols); err != nil {
			t.Fatalf("MatMul on valid geometry: %v", err)
		}
	})
}

// FuzzQuantize: arbitrary float bits never panic Quantize; whatever it
// accepts dequantises without error and reproduces every code's sign rule.
func FuzzQuantize(f *testing.F) {
	f.Add(uint8(1), []byte{0, 0, 128, 63, 0, 0, 128, 191})
	f.Add(uint8(2), []byte{0, 0, 192, 127})
	f.Fuzz(func(t *testing.T, rows uint8, wbytes []byte) {
		r := int(rows%4) + 1
		w := make([]float32, r*32)
		for i := range w {
			if 4*i+4 <= len(wbytes) {
				w[i] = math.Float32frombits(binary.LittleEndian.Uint32(wbytes[4*i:]))
			}
		}
		packed, scales, err := Quantize(w, r, 32)
		if err != nil {
			if !errors.Is(err, ErrNonFinite) && !errors.Is(err, ErrAllZero) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		deq := make([]float32, len(w))
		if err := Dequantize(deq, packed, scales, r, 32); err != nil {
			t.Fatal(err)
		}
		for i, v := range w {
			code := packed[i/2] >> (4 * (i % 2)) & 15
			if code == 8 || (code > 8) != (v < 0 && code&7 != 0) {
				t.Fatalf("w[%d] = %v got code %d", i, v, code)
			}
			if d := deq[i]; math.Abs(float64(d)) > 1.5*math.Abs(float64(v))+math.Ldexp(1, int(scales[i/32])-128) {
				t.Fatalf("w[%d] = %v dequantised to %v", i, v, d)
			}
		}
	})
}
