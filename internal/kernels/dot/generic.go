package dot

import (
	"encoding/binary"
	"math"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// This file is the pure-Go twin of the assembly kernels. It is the reference
// the fast paths are tested against, the implementation under -tags purego
// and on other architectures, and the fallback on CPUs without AVX2/FMA.
// Products are written as float64(w)*float64(x): they are exact in f64, so a
// compiler that fuses them into the adds cannot change a bit.

// reduce16 applies the R16 lane tree: c_l = (a[l]+a[l+4]) + (a[l+8]+a[l+12]),
// then (c0+c1) + (c2+c3).
func reduce16(a *[16]float64) float64 {
	c0 := (a[0] + a[4]) + (a[8] + a[12])
	c1 := (a[1] + a[5]) + (a[9] + a[13])
	c2 := (a[2] + a[6]) + (a[10] + a[14])
	c3 := (a[3] + a[7]) + (a[11] + a[15])
	return (c0 + c1) + (c2 + c3)
}

// genericF32Float is R16 over []float32 weights; len(w) == len(x).
func genericF32Float(w, x []float32) float32 {
	n := len(x)
	w = w[:n]
	m := n &^ 15
	var a [16]float64
	for i := 0; i < m; i += 16 {
		ws := w[i : i+16 : i+16]
		xs := x[i : i+16 : i+16]
		for l := range 16 {
			a[l] += float64(ws[l]) * float64(xs[l])
		}
	}
	acc := reduce16(&a)
	for i := m; i < n; i++ {
		acc += float64(w[i]) * float64(x[i])
	}
	return float32(acc)
}

// genericF32 is R16 over little-endian f32 weight bytes; len(w) == 4*len(x).
func genericF32(w []byte, x []float32) float32 {
	return float32(tailF32(genericHeadF32(w, x), w, x, len(x)&^15))
}

// genericBF16 is R16 over little-endian bf16 weight bytes; len(w) == 2*len(x).
func genericBF16(w []byte, x []float32) float32 {
	return float32(tailBF16(genericHeadBF16(w, x), w, x, len(x)&^15))
}

// genericF16 is R16 over little-endian f16 weight bytes; len(w) == 2*len(x).
func genericF16(w []byte, x []float32) float32 {
	return float32(tailF16(genericHeadF16(w, x), w, x, len(x)&^15))
}

// The head functions return the reduced lanes over the first 16·⌊n/16⌋
// elements; the tail functions continue that accumulator sequentially.

func genericHeadF32(w []byte, x []float32) float64 {
	m := len(x) &^ 15
	var a [16]float64
	for i := 0; i < m; i += 16 {
		ws := w[4*i : 4*i+64 : 4*i+64]
		xs := x[i : i+16 : i+16]
		for l := range 16 {
			wl := math.Float32frombits(binary.LittleEndian.Uint32(ws[4*l:]))
			a[l] += float64(wl) * float64(xs[l])
		}
	}
	return reduce16(&a)
}

func genericHeadBF16(w []byte, x []float32) float64 {
	m := len(x) &^ 15
	var a [16]float64
	for i := 0; i < m; i += 16 {
		ws := w[2*i : 2*i+32 : 2*i+32]
		xs := x[i : i+16 : i+16]
		for l := range 16 {
			wl := floatbits.BF16(binary.LittleEndian.Uint16(ws[2*l:]))
			a[l] += float64(wl) * float64(xs[l])
		}
	}
	return reduce16(&a)
}

func genericHeadF16(w []byte, x []float32) float64 {
	m := len(x) &^ 15
	var a [16]float64
	for i := 0; i < m; i += 16 {
		ws := w[2*i : 2*i+32 : 2*i+32]
		xs := x[i : i+16 : i+16]
		for l := range 16 {
			wl := floatbits.F16(binary.LittleEndian.Uint16(ws[2*l:]))
			a[l] += float64(wl) * float64(xs[l])
		}
	}
	return reduce16(&a)
}

func tailF32(acc float64, w []byte, x []float32, from int) float64 {
	for i := from; i < len(x); i++ {
		acc += float64(f32At(w, i)) * float64(x[i])
	}
	return acc
}

func tailBF16(acc float64, w []byte, x []float32, from int) float64 {
	for i := from; i < len(x); i++ {
		acc += float64(bf16At(w, i)) * float64(x[i])
	}
	return acc
}

func tailF16(acc float64, w []byte, x []float32, from int) float64 {
	for i := from; i < len(x); i++ {
		acc += float64(f16At(w, i)) * float64(x[i])
	}
	return acc
}

// genericMatVec runs a single-row kernel over every row.
func genericMatVec(dot func([]byte, []float32) float32, size int, dst []float32, w []byte, x []float32) {
	rb := size * len(x)
	for r := range dst {
		dst[r] = dot(w[r*rb:(r+1)*rb], x)
	}
}

// genericMatMul keeps the weight row outermost so it is read from memory
// once and reused, from cache, for every activation row.
func genericMatMul(dot func([]byte, []float32) float32, size int, dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	rb := size * cols
	for r := range rows {
		wr := w[r*rb : (r+1)*rb]
		for t := range n {
			dst[t*stride+r] = dot(wr, x[t*cols:(t+1)*cols])
		}
	}
}
