//go:build amd64 && !purego

package attention

// n > 0 is a multiple of 8; z selects the AVX-512 loop for whole runs of
// sixteen.
//
//go:noescape
func decayReadAVX(row, u *float32, a, k float32, n int, z bool)

//go:noescape
func writeOutAVX(row, o, e *float32, kb, q float32, n int, z bool)

//go:noescape
func writeDecayAVX(row, o, e, u *float32, kb, q, a, k float32, n int, z bool)

//go:noescape
func writeDecayHead(S, o, e, u, kt *float32, b float32, q, an, kn *float32)

// headDim is the head width writeDecayHead is written for (Kimi K3's).
const headDim = 128

// writeDecayHeadRows is writeDecayRows in one kernel call for a head of
// headDim on AVX-512; it reports false, doing nothing, otherwise.
func writeDecayHeadRows(S, o, e, u, kt []float32, b float32, q, an, kn []float32) bool {
	d := len(e)
	if !useAVX512 || d != headDim {
		return false
	}
	S, o, u = S[:d*d], o[:d], u[:d]
	kt, q, an, kn = kt[:d], q[:d], an[:d], kn[:d]
	writeDecayHead(&S[0], &o[0], &e[0], &u[0], &kt[0], b, &q[0], &an[0], &kn[0])
	return true
}

func decayRead(row, u []float32, a, k float32) {
	n := len(row)
	m := n &^ 7
	if !useAVX2 || m == 0 {
		decayReadGo(row, u, a, k)
		return
	}
	u = u[:n]
	decayReadAVX(&row[0], &u[0], a, k, m, useAVX512)
	decayReadGo(row[m:], u[m:], a, k)
}

func writeOut(row, o, e []float32, kb, q float32) {
	n := len(row)
	m := n &^ 7
	if !useAVX2 || m == 0 {
		writeOutGo(row, o, e, kb, q)
		return
	}
	o, e = o[:n], e[:n]
	writeOutAVX(&row[0], &o[0], &e[0], kb, q, m, useAVX512)
	writeOutGo(row[m:], o[m:], e[m:], kb, q)
}

func writeDecay(row, o, e, u []float32, kb, q, a, k float32) {
	n := len(row)
	m := n &^ 7
	if !useAVX2 || m == 0 {
		writeDecayGo(row, o, e, u, kb, q, a, k)
		return
	}
	o, e, u = o[:n], e[:n], u[:n]
	writeDecayAVX(&row[0], &o[0], &e[0], &u[0], kb, q, a, k, m, useAVX512)
	writeDecayGo(row[m:], o[m:], e[m:], u[m:], kb, q, a, k)
}
