package cache

import (
	"github.com/k3-project/k3/storage"
)

// Option configures a Store.
type Option func(*options)

type options struct {
	policy  PolicyName
	workers int
	opener  storage.Opener
	// aligned makes the aligned reader of an opened shard; tests replace it
	// to read through a strict O_DIRECT stand-in.
	aligned   func(f storage.File, path string) *storage.Reader
	noDirect  bool
	noHuge    bool
	tracer    Tracer
	maxBatch  int
	speculate bool
}

func defaultOptions() options {
	return options{policy: S3FIFO, workers: 4, aligned: storage.NewReader}
}

// WithPolicy selects the replacement policy (default S3FIFO).
func WithPolicy(p PolicyName) Option { return func(o *options) { o.policy = p } }

// WithReadWorkers bounds the concurrent reads of one Experts call (default 4).
func WithReadWorkers(n int) Option { return func(o *options) { o.workers = max(1, n) } }

// WithOpener replaces how shard files are opened (default storage.Open).
// Files that are an *os.File are read with O_DIRECT where the file system
// allows it, others through their ReadAt (storage.NewReader).
func WithOpener(open storage.Opener) Option { return func(o *options) { o.opener = open } }

// WithoutDirectIO reads through the page cache.
func WithoutDirectIO() Option { return func(o *options) { o.noDirect = true } }

// WithoutHugePages skips madvise(MADV_HUGEPAGE) on the arena.
func WithoutHugePages() Option { return func(o *options) { o.noHuge = true } }

// WithTracer receives every demand request (layer, expert) in request order.
func WithTracer(t Tracer) Option { return func(o *options) { o.tracer = t } }

// WithMaxBatch sets how many distinct experts one call may lease (the wave
// size of chunk-union prefill); it is clamped to [TopK, slots − 1]. The
// default is max(TopK, ⌊slots/2⌋), leaving room for a second caller.
func WithMaxBatch(n int) Option { return func(o *options) { o.maxBatch = n } }

// WithSpeculation enables §9.4 speculation: once a layer's experts
// are leased, the previous token's picks of the next layer are prefetched
// in the background (so the reads overlap the layer's compute). It stays off when the cache has fewer than 2·TopK + 8
// slots (Stats reports it).
func WithSpeculation() Option { return func(o *options) { o.speculate = true } }
