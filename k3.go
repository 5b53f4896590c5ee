package k3

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/nn"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// Option configures Open.
type Option func(*options) error

type options struct {
	threads   int
	integrity integrityOptions
}

// WithThreads sets the number of goroutines used for mat-vec rows, heads and positions (n ≥ 1;
// default GOMAXPROCS). Results are bit-identical for every value (SPEC §5.6).
func WithThreads(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("k3: WithThreads(%d): need at least 1", n)
		}
		o.threads = n
		return nil
	}
}

// Model is an opened, bound checkpoint. Its weights are read through memory-mapped shards (no
// copy), so the page cache, not the Go heap, holds them. A Model is safe for concurrent use by
// many Sessions; Close must not race with them.
type Model struct {
	dir     string
	cfg     config.Config
	threads int
	ck      *safetensors.Checkpoint

	embed  quant.Matrix // [V, E]; rows gathered and widened exactly
	lmHead quant.Matrix // [V, E]
	norm   []float32    // final RMSNorm gain [E]
	outAgg *nn.AttnRes  // output_attn_res_{norm,proj}
	eps    float32
	layers []layer
	info   Info
	integ  IntegrityReport
	mu     sync.RWMutex // guards closed against in-flight forwards
	closed bool
}

// layer is one bound decoder layer: its AttnRes wiring, its mixer and its FFN.
type layer struct {
	res nn.Residual
	kda *attention.KDA // exactly one of kda, mla is set
	mla *attention.MLA
	ffn ffn
}

// Open reads config.json in dir, opens the checkpoint's shards (through the index when there is
// one) and binds every tensor of the text model by its released name, checking dtypes and
// shapes (SPEC §3.3). Missing or mis-shaped tensors are all reported in one *BindError; the
// vision tower and other unknown tensors are ignored.
func Open(dir string, opts ...Option) (*Model, error) {
	o := options{threads: runtime.GOMAXPROCS(0)}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("k3: open %s: %w", dir, err)
	}
	// WithIncomplete lets the bind step name every absent tensor and the shard that should hold
	// it, instead of failing at the first absent shard.
	ck, err := safetensors.Open(dir, safetensors.WithIncomplete())
	if err != nil {
		return nil, fmt.Errorf("k3: open %s: %w", dir, err)
	}
	m := &Model{dir: dir, cfg: *cfg, threads: o.threads, ck: ck, eps: float32(cfg.RMSEps)}
	if err := m.preflight(o.integrity); err != nil {
		ck.Close()
		return nil, err
	}
	if err := m.bind(); err != nil {
		ck.Close()
		return nil, err
	}
	return m, nil
}

// Close releases the shard mappings. Sessions of the model fail with ErrClosed afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.ck.Close()
}

// Config returns a copy of the model's configuration.
func (m *Model) Config() config.Config { return *m.cfg.Clone() }

// Threads returns the worker count the model was opened with.
func (m *Model) Threads() int { return m.threads }

// Dir returns the checkpoint directory.
func (m *Model) Dir() string { return m.dir }

// Warnings returns the checkpoint reader's non-fatal findings (stray shard files the index does
// not name, tolerated index disagreements), for logging.
func (m *Model) Warnings() []string { return m.ck.Warnings() }
