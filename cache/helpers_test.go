package cache

import (
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/stretchr/testify/require"
)

// The cache fixture (§13.3): layer 0, 24 experts of 1,632 bytes, no
// configuration; tests use NE = 24, TopK = 4.
const (
	fixNE, fixTopK  = 24, 4
	fixExpertBytes  = 1632
	fixShardRelPath = "cache/model-00001-of-00001.safetensors"
)

func openFixture(t testing.TB) *safetensors.Checkpoint {
	t.Helper()
	ck, err := safetensors.Open(testkit.Path(t, fixShardRelPath))
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	return ck
}

// fixtureByte is byte n of tensor (e, w, scale): (n + base) mod 251 with
// base = (977·e + 31·w + 7·scale) mod 256.
func fixtureByte(e, w int, scale bool, n int) byte {
	base := 977*e + 31*w
	if scale {
		base += 7
	}
	base %= 256
	return byte((n + base) % 251)
}

// fixtureBytes returns the first n bytes fixtureByte gives for (e, w, scale).
func fixtureBytes(e, w int, scale bool, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = fixtureByte(e, w, scale, i)
	}
	return b
}

// strictDirect is a ReaderAt that behaves like an O_DIRECT descriptor:
// offset, length and buffer address must be multiples of 4096 (else EINVAL).
type strictDirect struct{ f io.ReaderAt }

func (d strictDirect) ReadAt(p []byte, off int64) (int, error) {
	if off%4096 != 0 || len(p)%4096 != 0 || (len(p) > 0 && uintptr(unsafe.Pointer(&p[0]))%4096 != 0) {
		return 0, syscall.EINVAL
	}
	return d.f.ReadAt(p, off)
}

// withStrictDirect reads every shard in direct mode through strictDirect
// with no buffered fallback, so a misaligned slot fails instead of silently
// degrading.
func withStrictDirect() Option {
	return func(o *options) {
		o.aligned = func(f storage.File, _ string) *storage.Reader {
			return storage.NewDirectReader(strictDirect{f}, nil)
		}
	}
}

// faultFile injects failures into reads that overlap [lo, hi): EIO, or a
// short read (the bytes before lo, then io.EOF).
type faultFile struct {
	f      *os.File
	mu     sync.Mutex
	lo, hi int64
	short  bool
	on     bool
}

func (ff *faultFile) set(lo, hi int64, short bool) {
	ff.mu.Lock()
	ff.lo, ff.hi, ff.short, ff.on = lo, hi, short, true
	ff.mu.Unlock()
}

func (ff *faultFile) heal() {
	ff.mu.Lock()
	ff.on = false
	ff.mu.Unlock()
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	ff.mu.Lock()
	lo, hi, short, on := ff.lo, ff.hi, ff.short, ff.on
	ff.mu.Unlock()
	if on && off < hi && off+int64(len(p)) > lo {
		if !short {
			return 0, syscall.EIO
		}
		n := max(0, lo-off)
		m, _ := ff.f.ReadAt(p[:n], off)
		return m, io.EOF
	}
	return ff.f.ReadAt(p, off)
}

// Stat and Close make a faultFile a storage.File.
func (ff *faultFile) Stat() (fs.FileInfo, error) { return ff.f.Stat() }
func (ff *faultFile) Close() error               { return ff.f.Close() }

// faultOpener opens every shard through one faultFile (the fixtures used
// with it have one shard).
func faultOpener(ff *faultFile) storage.Opener {
	return func(path string) (storage.File, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		ff.f = f
		return ff, nil
	}
}

func newRef(t testing.TB, rows, cols int, packed, scales []byte) interface{ DecodeRow([]float32, int) } {
	m, err := quant.NewMXFP4(rows, cols, packed, scales)
	if err != nil {
		if t != nil {
			require.NoError(t, err)
		}
		panic(err)
	}
	return m.(quant.RowDecoder)
}
