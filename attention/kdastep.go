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
