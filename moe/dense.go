package moe

import (
	"fmt"
	"sync"

	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/quant"
)

// Dense is a gated MLP out = W_down · SiTU-GLU(W_gate x, W_up x; β1, β2):
// the FFN of the first (dense) layers (§4.7) and, with the fused width
// S·I, the shared expert of every MoE layer. It is SiTU-GLU, not SwiGLU.
type Dense struct {
	gate, up, down quant.Matrix
	beta1, beta2   float32
	workers        int
	splits         parallel.Runner // runs the activation's split; nil: goroutines per call
	pool           sync.Pool       // *Workspace for calls that bring none
}

// NewDense binds a gated MLP: gate and up are [I, E], down is [E, I].
// beta1/beta2 are f32(situ_beta) and f32(situ_linear_beta); workers bounds
// the goroutines of the row-parallel mat-muls (results never depend on it).
func NewDense(gate, up, down quant.Matrix, beta1, beta2 float32, workers int) (*Dense, error) {
	return NewDensePool(gate, up, down, beta1, beta2, workers, nil)
}

// NewDensePool is NewDense with the split of the activation run on pool
// (the mat-muls split as their matrices do).
func NewDensePool(gate, up, down quant.Matrix, beta1, beta2 float32, workers int, pool Runner) (*Dense, error) {
	if gate == nil || up == nil || down == nil {
		return nil, fmt.Errorf("moe: dense: gate, up and down are required")
	}
	i, e := gate.Rows(), gate.Cols()
	if up.Rows() != i || up.Cols() != e || down.Rows() != e || down.Cols() != i {
		return nil, fmt.Errorf("moe: dense: gate [%d, %d], up [%d, %d], down [%d, %d]; want [I, E], [I, E], [E, I]",
			i, e, up.Rows(), up.Cols(), down.Rows(), down.Cols())
	}
	if !(beta1 > 0) || !(beta2 > 0) {
		return nil, fmt.Errorf("moe: dense: SiTU betas %v, %v must be > 0", beta1, beta2)
	}
	return &Dense{gate: gate, up: up, down: down, beta1: beta1, beta2: beta2, workers: workers, splits: parallel.RunnerOr(pool)}, nil
}

// Width returns the model width E.
func (d *Dense) Width() int { return d.gate.Cols() }

// Inter returns the intermediate width I.
func (d *Dense) Inter() int { return d.gate.Rows() }

// Forward computes T positions: x and dst are [T][E] and must not alias.
func (d *Dense) Forward(dst, x []float32, T int) error {
	ws, _ := d.pool.Get().(*Workspace)
	if ws == nil {
		ws = new(Workspace)
	}
	err := d.ForwardWith(dst, x, T, ws)
	d.pool.Put(ws)
	return err
}

// ForwardWith is Forward using the caller's scratch memory (nil borrows one
// from the layer's pool); ws must not be used concurrently by another call.
// Results are bit-identical to Forward.
func (d *Dense) ForwardWith(dst, x []float32, T int, ws *Workspace) error {
	if ws == nil {
		return d.Forward(dst, x, T)
	}
	e := d.gate.Cols()
	if T < 1 || len(x) != T*e || len(dst) != T*e {
		return fmt.Errorf("moe: dense: len(x)=%d len(dst)=%d, want T·E = %d·%d", len(x), len(dst), T, e)
	}
	i := d.gate.Rows()
	ws.f32.Reset(2 * T * i)
	gatedMLP(dst, x, T, d.gate, d.up, d.down, d.beta1, d.beta2, d.workers, d.splits, &ws.glu, ws.f32.Take(T*i), ws.f32.Take(T*i))
	return nil
}

// gatedMLP computes W2·SiTU-GLU(W1 x, W3 x) for n rows of x; g and u are
// scratch of n·I floats each. Shapes are the caller's responsibility.
//
// The activation is split on pool (nil: goroutines per call) with its
// arguments parked in glu, which the caller keeps, so the split allocates
// nothing.
func gatedMLP(dst, x []float32, n int, w1, w3, w2 quant.Matrix, b1, b2 float32, workers int, pool parallel.Runner, glu *gluSplit, g, u []float32) {
	i := w1.Rows()
	g, u = g[:n*i], u[:n*i]
	quant.MatMulParallel(w1, g, i, x, n, workers)
	quant.MatMulParallel(w3, u, i, x, n, workers)
	// Elementwise, so splitting it over workers cannot change a bit.
	if parallel.Chunks(n*i, pool.Limit(workers), 1024) > 1 {
		*glu = gluSplit{g: g, u: u, b1: b1, b2: b2}
		pool.Run(n*i, workers, 1024, glu)
		*glu = gluSplit{} // hold no references to the caller's data
	} else {
		nn.SiTUGLU(g, g, u, b1, b2)
	}
	quant.MatMulParallel(w2, dst, w2.Rows(), g, n, workers)
}

// gluSplit is the activation of gatedMLP split over index ranges, as a
// parallel.Task.
type gluSplit struct {
	g, u   []float32
	b1, b2 float32
}

func (t *gluSplit) Run(lo, hi int) { nn.SiTUGLU(t.g[lo:hi], t.g[lo:hi], t.u[lo:hi], t.b1, t.b2) }
