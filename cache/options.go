package cache

import (
	"os"

	"github.com/k3-project/k3/safetensors"
)

// Reader reads aligned windows of one shard file (SPEC §7.5);
// *safetensors.DirectReader is one. ReadAligned returns the n payload bytes
// at off as a sub-slice of buf, which is 4096-aligned with room for the
// enclosing window. Tests implement it to inject failed and short reads.
type Reader interface {
	ReadAligned(buf []byte, off, n int64) ([]byte, error)
	Mode() safetensors.IOMode
	Close() error
}

// Opener opens a shard file for expert reads.
type Opener func(path string) (Reader, error)

// Option configures a Store.
type Option func(*options)

type options struct {
	policy    PolicyName
	workers   int
	opener    Opener
	noDirect  bool
	noHuge    bool
	tracer    Tracer
	maxBatch  int
	prefix    string
	speculate bool
}

func defaultOptions() options {
	return options{policy: S3FIFO, workers: 4, prefix: DefaultPrefix}
}

// WithPolicy selects the replacement policy (default S3FIFO).
func WithPolicy(p PolicyName) Option { return func(o *options) { o.policy = p } }

// WithReadWorkers bounds the concurrent reads of one GetMany (default 4).
func WithReadWorkers(n int) Option { return func(o *options) { o.workers = max(1, n) } }

// WithOpener replaces how shard files are opened (default: O_DIRECT where
// the file system allows it, else buffered; see safetensors.OpenDirect).
func WithOpener(open Opener) Option { return func(o *options) { o.opener = open } }

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

// WithPrefix sets the tensor-name prefix (default DefaultPrefix).
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithSpeculation enables SPEC §9.4 speculation: once a layer's experts
// are leased, the previous token's picks of the next layer are prefetched
// in the background (so the reads overlap the layer's compute). It stays off when the cache has fewer than 2·TopK + 8
// slots (Stats reports it).
func WithSpeculation() Option { return func(o *options) { o.speculate = true } }

// bufferedReader is a buffered DirectReader that owns its file.
type bufferedReader struct {
	*safetensors.DirectReader
	f *os.File
}

func (b bufferedReader) Close() error { return b.f.Close() }

func openBuffered(path string) (Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return bufferedReader{safetensors.NewDirectReader(f, safetensors.ModeBuffered, nil), f}, nil
}

func openDirect(path string) (Reader, error) {
	d, err := safetensors.OpenDirect(path)
	if err != nil {
		return nil, err
	}
	return d, nil
}
