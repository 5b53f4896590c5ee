package mxfp4

import "github.com/k3-project/k3/internal/kernels/floatbits"

// genericKernel is the pure-Go twin: the reference the assembly must match
// bit for bit, and the kernel on every other architecture.
var genericKernel = kernel{widen: floatbits.Widen64, align: GroupSize, rows: rowsGeneric}

// rowsGeneric computes dst[r] for len(dst) rows of len(xw) columns.
func rowsGeneric(dst []float32, packed, scales []byte, xw []float64) int {
	ng := len(xw) / GroupSize
	nan := 0
	for r := range dst {
		acc := 0.0
		for g := range ng {
			s := scales[r*ng+g]
			if s == NaNScale {
				nan++
				continue
			}
			i := r*ng + g
			sub := groupDot(packed[i*16:i*16+16], xw[g*GroupSize:g*GroupSize+GroupSize])
			acc += sub * scale64(s)
		}
		dst[r] = float32(acc)
	}
	return nan
}

// groupDot is the RG sub-sum of one group: element j goes to lane j mod 8,
// lanes start at +0 and add in ascending j, then the fixed tree. Byte i holds
// elements 2i (low nibble) and 2i+1 (high nibble), so byte i feeds lanes
// 2i mod 8 and 2i+1 mod 8. Products are exact, so fusion cannot matter.
func groupDot(b []byte, x []float64) float64 {
	b = b[:16]
	x = x[:32]
	var s0, s1, s2, s3, s4, s5, s6, s7 float64
	for k := 0; k < 4; k++ {
		q := b[4*k : 4*k+4]
		v := x[8*k : 8*k+8]
		s0 += e2m1f64[q[0]&15] * v[0]
		s1 += e2m1f64[q[0]>>4] * v[1]
		s2 += e2m1f64[q[1]&15] * v[2]
		s3 += e2m1f64[q[1]>>4] * v[3]
		s4 += e2m1f64[q[2]&15] * v[4]
		s5 += e2m1f64[q[2]>>4] * v[5]
		s6 += e2m1f64[q[3]&15] * v[6]
		s7 += e2m1f64[q[3]>>4] * v[7]
	}
	return ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))
}
