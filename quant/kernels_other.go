//go:build !amd64 || purego

package quant

// Without the assembly every kernel is its pure-Go twin.

const useAVX2 = false

func r16Int8(q []byte, x []float64) float64                      { return r16Int8Go(q, x) }
func r16Int4(q []byte, x []float64) float64                      { return r16Int4Go(q, x) }
func rgInt4Row(q []byte, x []float64, sc []byte, gs int) float64 { return rgInt4RowGo(q, x, sc, gs) }
func rgFP8Row(q []byte, x []float64, sc []byte) float64          { return rgFP8RowGo(q, x, sc) }
