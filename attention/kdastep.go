package attention

// The two passes of kdaStep over one state row, vectorisable across the
// value channels j. Every statement is a float32 multiply or add rounded on
// its own (the explicit float32 conversions forbid FMA fusion), so a SIMD
// version that multiplies and adds in separate instructions reproduces it
// bit for bit.

// decayReadGo: s = a ⊗ row[j]; row[j] = s; u[j] = u[j] ⊕ (k ⊗ s).
func decayReadGo(row, u []float32, a, k float32) {
	u = u[:len(row)]
	for j, v := range row {
		s := a * v
		row[j] = s
		u[j] = u[j] + float32(k*s)
	}
}

// writeOutGo: s = row[j] ⊕ (kb ⊗ e[j]); row[j] = s; o[j] = o[j] ⊕ (q ⊗ s).
func writeOutGo(row, o, e []float32, kb, q float32) {
	o, e = o[:len(row)], e[:len(row)]
	for j, v := range row {
		s := v + float32(kb*e[j])
		row[j] = s
		o[j] = o[j] + float32(q*s)
	}
}

// writeDecayGo is writeOutGo for one position then decayReadGo for the
// next, element by element: s = row[j] ⊕ (kb ⊗ e[j]); o[j] = o[j] ⊕ (q ⊗ s);
// s' = a ⊗ s; row[j] = s'; u[j] = u[j] ⊕ (k ⊗ s').
func writeDecayGo(row, o, e, u []float32, kb, q, a, k float32) {
	o, e, u = o[:len(row)], e[:len(row)], u[:len(row)]
	for j, v := range row {
		s := v + float32(kb*e[j])
		o[j] = o[j] + float32(q*s)
		s = a * s
		row[j] = s
		u[j] = u[j] + float32(k*s)
	}
}

// writeDecayRows is writeDecay over every row i of the d×d state S (d =
// len(e)) with scalars kt[i]·b, q[i], an[i], kn[i], o and u starting from
// +0: one position's write and output pass fused with the next one's decay
// and read.
func writeDecayRows(S, o, e, u, kt []float32, b float32, q, an, kn []float32) {
	if writeDecayHeadRows(S, o, e, u, kt, b, q, an, kn) {
		return
	}
	d := len(e)
	clear(o)
	clear(u)
	for i := range d {
		writeDecay(S[i*d:i*d+d], o, e, u, kt[i]*b, q[i], an[i], kn[i])
	}
}
