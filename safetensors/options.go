package safetensors

import (
	"errors"
	"os"

	"github.com/k3-project/k3/internal/fileio/regular"

	"github.com/k3-project/k3/storage"
)

// Option configures Open.
type Option func(*options)

type options struct {
	open     storage.Opener
	warn     func(msg string)
	workers  int
	lenient  bool
	noDirect bool

	// openDirect is storage.NewReader; tests replace it to simulate a file
	// system that refuses O_DIRECT.
	openDirect func(f *os.File, path string) *storage.Reader
}

func defaultOptions() options {
	return options{open: openRegular, openDirect: func(f *os.File, path string) *storage.Reader { return storage.NewReader(f, path) }}
}

// openRegular opens a shard without blocking (a FIFO would block open(2)
// forever) and refuses anything but a regular file.
func openRegular(path string) (storage.File, error) {
	f, _, err := regular.Open(path)
	if errors.Is(err, regular.ErrNotRegular) {
		return nil, newErr(path, "", -1, ErrNotRegular, err.Error())
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// WithOpener makes Open read shards through open instead of storage.Open.
// When the returned File is not an *os.File, Bytes returns heap copies instead of
// mmap views and direct reads fall back to buffered reads through it.
func WithOpener(open storage.Opener) Option {
	return func(o *options) {
		if open != nil {
			o.open = open
		}
	}
}

// WithWarnings receives non-fatal findings (stray shard files, index
// disagreements tolerated by WithIncomplete, direct-I/O fallback) as they
// happen. Checkpoint.Warnings returns them as well.
func WithWarnings(fn func(msg string)) Option {
	return func(o *options) { o.warn = fn }
}

// WithWorkers sets how many goroutines parse shard headers (default
// GOMAXPROCS).
func WithWorkers(n int) Option {
	return func(o *options) { o.workers = n }
}

// WithIncomplete opens a partially downloaded checkpoint: shards the index
// names but that do not exist, and tensors the index lists that their shard
// lacks, become warnings instead of errors. Require then reports, for a
// missing tensor, which shard should hold it and why it is not there. Every
// other rule (header validation, duplicates, unlisted tensors, total_size of
// a complete checkpoint) still applies.
func WithIncomplete() Option {
	return func(o *options) { o.lenient = true }
}

// WithoutDirectIO makes ReadDirect always use buffered reads.
func WithoutDirectIO() Option {
	return func(o *options) { o.noDirect = true }
}
