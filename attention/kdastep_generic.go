//go:build !amd64 || purego

package attention

func decayRead(row, u []float32, a, k float32) { decayReadGo(row, u, a, k) }

func writeOut(row, o, e []float32, kb, q float32) { writeOutGo(row, o, e, kb, q) }

func writeDecay(row, o, e, u []float32, kb, q, a, k float32) { writeDecayGo(row, o, e, u, kb, q, a, k) }

func writeDecayHeadRows(S, o, e, u, kt []float32, b float32, q, an, kn []float32) bool {
	return false
}
