package quant

// Pure-Go kernels over packed integer and fp8 bytes. Activations arrive
// widened to float64 once per call (widen); the widening is exact, so this
// changes no result. They are the reference
// twins of any SIMD path and follow §5.2 literally: R16 for the per-row
// integer formats, RG for the grouped ones. Every product of a decoded weight
// (an integer of at most 4 bits magnitude 127, or an E4M3 value) with a
// float32 is exact in float64, so the order of the additions alone fixes the
// bits.

// nib64[k] is the value of offset-8 nibble k.
var nib64 = [16]float64{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

// r16Int8Go is R16 over int8 weights q (len(q) == len(x)), unrounded.
func r16Int8Go(q []byte, x []float64) float64 {
	n := len(x)
	q = q[:n]
	var a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 float64
	m := n &^ 15
	for i := 0; i < m; i += 16 {
		w := q[i : i+16 : i+16]
		v := x[i : i+16 : i+16]
		a0 += float64(int8(w[0])) * v[0]
		a1 += float64(int8(w[1])) * v[1]
		a2 += float64(int8(w[2])) * v[2]
		a3 += float64(int8(w[3])) * v[3]
		a4 += float64(int8(w[4])) * v[4]
		a5 += float64(int8(w[5])) * v[5]
		a6 += float64(int8(w[6])) * v[6]
		a7 += float64(int8(w[7])) * v[7]
		a8 += float64(int8(w[8])) * v[8]
		a9 += float64(int8(w[9])) * v[9]
		a10 += float64(int8(w[10])) * v[10]
		a11 += float64(int8(w[11])) * v[11]
		a12 += float64(int8(w[12])) * v[12]
		a13 += float64(int8(w[13])) * v[13]
		a14 += float64(int8(w[14])) * v[14]
		a15 += float64(int8(w[15])) * v[15]
	}
	acc := r16Reduce(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
	for i := m; i < n; i++ {
		acc += float64(int8(q[i])) * x[i]
	}
	return acc
}

// r16Int4Go is R16 over offset-8 nibbles q (⌈len(x)/2⌉ bytes, even element =
// low nibble), unrounded.
func r16Int4Go(q []byte, x []float64) float64 {
	n := len(x)
	q = q[:(n+1)/2]
	var a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 float64
	m := n &^ 15
	for i := 0; i < m; i += 16 {
		w := q[i/2 : i/2+8 : i/2+8]
		v := x[i : i+16 : i+16]
		a0 += nib64[w[0]&15] * v[0]
		a1 += nib64[w[0]>>4] * v[1]
		a2 += nib64[w[1]&15] * v[2]
		a3 += nib64[w[1]>>4] * v[3]
		a4 += nib64[w[2]&15] * v[4]
		a5 += nib64[w[2]>>4] * v[5]
		a6 += nib64[w[3]&15] * v[6]
		a7 += nib64[w[3]>>4] * v[7]
		a8 += nib64[w[4]&15] * v[8]
		a9 += nib64[w[4]>>4] * v[9]
		a10 += nib64[w[5]&15] * v[10]
		a11 += nib64[w[5]>>4] * v[11]
		a12 += nib64[w[6]&15] * v[12]
		a13 += nib64[w[6]>>4] * v[13]
		a14 += nib64[w[7]&15] * v[14]
		a15 += nib64[w[7]>>4] * v[15]
	}
	acc := r16Reduce(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
	for i := m; i < n; i++ {
		acc += nibAt(q, i) * x[i]
	}
	return acc
}

// nibAt is the value of element i of an offset-8 nibble row.
func nibAt(q []byte, i int) float64 {
	b := q[i>>1]
	if i&1 != 0 {
		b >>= 4
	}
	return nib64[b&15]
}

// r16Reduce is the R16 tree: c_l = (a[l]+a[l+4]) + (a[l+8]+a[l+12]), then
// (c0+c1) + (c2+c3).
func r16Reduce(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 float64) float64 {
	c0 := (a0 + a4) + (a8 + a12)
	c1 := (a1 + a5) + (a9 + a13)
	c2 := (a2 + a6) + (a10 + a14)
	c3 := (a3 + a7) + (a11 + a15)
	return (c0 + c1) + (c2 + c3)
}

// rgReduce is the RG tree ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)).
func rgReduce(s0, s1, s2, s3, s4, s5, s6, s7 float64) float64 {
	return ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))
}

// subInt4Go is the RG sub-sum of one group of offset-8 nibbles: elements
// [c0, c0+len(x)) of a row whose bytes are q (c0 even, so the group starts on
// a byte boundary and q is the row from that byte on).
func subInt4Go(q []byte, x []float64) float64 {
	n := len(x)
	var s0, s1, s2, s3, s4, s5, s6, s7 float64
	m := n &^ 7
	for j := 0; j < m; j += 8 {
		w := q[j/2 : j/2+4 : j/2+4]
		v := x[j : j+8 : j+8]
		s0 += nib64[w[0]&15] * v[0]
		s1 += nib64[w[0]>>4] * v[1]
		s2 += nib64[w[1]&15] * v[2]
		s3 += nib64[w[1]>>4] * v[3]
		s4 += nib64[w[2]&15] * v[4]
		s5 += nib64[w[2]>>4] * v[5]
		s6 += nib64[w[3]&15] * v[6]
		s7 += nib64[w[3]>>4] * v[7]
	}
	sub := rgReduce(s0, s1, s2, s3, s4, s5, s6, s7)
	for j := m; j < n; j++ {
		sub += nibAt(q, j) * x[j]
	}
	return sub
}

// subFP8Go is the RG sub-sum of one group of E4M3 bytes (len(q) >= len(x)).
func subFP8Go(q []byte, x []float64) float64 {
	n := len(x)
	q = q[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float64
	m := n &^ 7
	for j := 0; j < m; j += 8 {
		w := q[j : j+8 : j+8]
		v := x[j : j+8 : j+8]
		s0 += fp8f64[w[0]] * v[0]
		s1 += fp8f64[w[1]] * v[1]
		s2 += fp8f64[w[2]] * v[2]
		s3 += fp8f64[w[3]] * v[3]
		s4 += fp8f64[w[4]] * v[4]
		s5 += fp8f64[w[5]] * v[5]
		s6 += fp8f64[w[6]] * v[6]
		s7 += fp8f64[w[7]] * v[7]
	}
	sub := rgReduce(s0, s1, s2, s3, s4, s5, s6, s7)
	for j := m; j < n; j++ {
		sub += fp8f64[q[j]] * x[j]
	}
	return sub
}

// rgInt4RowGo is the RG sum of one int4-grouped row: groups of gs, the last
// possibly short, acc += sub·f64(scale_g) in group order. It returns the
// unrounded acc.
func rgInt4RowGo(q []byte, x []float64, sc []byte, gs int) float64 {
	return rgInt4Tail(0, q, x, sc, gs, 0)
}

// rgInt4Tail continues an int4-grouped row sum acc from group g0 on.
func rgInt4Tail(acc float64, q []byte, x []float64, sc []byte, gs, g0 int) float64 {
	for c0 := g0 * gs; c0 < len(x); c0 += gs {
		c1 := min(c0+gs, len(x))
		sub := subInt4Go(q[c0/2:], x[c0:c1])
		// The conversion keeps the rounded product from fusing into the add.
		acc += float64(sub * float64(f32At(sc, c0/gs)))
	}
	return acc
}

// rgFP8RowGo is the RG sum of one fp8-e4m3-b128 row: groups of 128, the
// last possibly short, with the scales of the row's block row in sc.
func rgFP8RowGo(q []byte, x []float64, sc []byte) float64 {
	return rgFP8Tail(0, q, x, sc, 0)
}

// rgFP8Tail continues an fp8 row sum acc from group g0 on.
func rgFP8Tail(acc float64, q []byte, x []float64, sc []byte, g0 int) float64 {
	for c0 := g0 * FP8Block; c0 < len(x); c0 += FP8Block {
		c1 := min(c0+FP8Block, len(x))
		sub := subFP8Go(q[c0:c1], x[c0:c1])
		acc += float64(sub * float64(f32At(sc, c0/FP8Block)))
	}
	return acc
}
