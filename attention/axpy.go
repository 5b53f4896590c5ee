package attention

// The absorbed MLA spends its non-mat-vec time in two column reductions of
// the same shape: the key-half absorption q'_h[r] = RS_j q_j·W_uk,h[j][r] and
// the latent mix m_h[r] = RS_s p_s·lat_s[r]. Both are a float64 accumulator
// per column r fed by a sequence of rows in a fixed order, i.e. repeated
// acc[r] += a·f64(x[r]). The kernels below apply one or four rows per pass
// (four rows as four sequential additions per element, so the order of the
// additions to every acc[r] is exactly the row order), vectorised across r.
// Every product is of two float32 values and therefore exact in float64, so
// a fused multiply-add gives the same bits as a multiply then an add.

// axpyRows adds rows to acc in order: for each row j, acc[r] += a[j]·f64(rows[j][r]).
// Every row has len(acc) elements.
func axpyRows(acc []float64, a []float64, rows [][]float32) {
	j := 0
	for ; j+4 <= len(rows); j += 4 {
		axpy4(acc, a[j:j+4:j+4], rows[j], rows[j+1], rows[j+2], rows[j+3])
	}
	for ; j < len(rows); j++ {
		axpy1(acc, a[j], rows[j])
	}
}

// axpy1Go is acc[r] += a·f64(x[r]), r ascending.
func axpy1Go(acc []float64, a float64, x []float32) {
	x = x[:len(acc)]
	for r, v := range x {
		acc[r] += a * float64(v)
	}
}

// axpy4Go is four axpy1Go passes fused: per element the additions happen in
// the order x0, x1, x2, x3.
func axpy4Go(acc []float64, a []float64, x0, x1, x2, x3 []float32) {
	n := len(acc)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	for r := range acc {
		s := acc[r] + a0*float64(x0[r])
		s += a1 * float64(x1[r])
		s += a2 * float64(x2[r])
		acc[r] = s + a3*float64(x3[r])
	}
}
