package storage_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/k3-project/k3/storage"
)

func TestWindow(t *testing.T) {
	cases := []struct{ off, n, lo, hi, pad int64 }{
		{0, 0, 0, 0, 0},
		{0, 1, 0, 4096, 0},
		{0, 4096, 0, 4096, 0},
		{0, 4097, 0, 8192, 0},
		{4095, 1, 0, 4096, 4095},
		{4095, 2, 0, 8192, 4095},
		{4096, 0, 4096, 4096, 0},
		{4096, 4096, 4096, 8192, 0},
		{4097, 4095, 4096, 8192, 1},
		{4097, 4096, 4096, 12288, 1},
		{8191, 1, 4096, 8192, 4095},
		{1 << 40, 17_547_264, 1 << 40, 1<<40 + 17_547_264, 0},
	}
	for _, c := range cases {
		lo, hi, pad := storage.Window(c.off, c.n)
		if lo != c.lo || hi != c.hi || pad != c.pad || storage.WindowLen(c.off, c.n) != c.hi-c.lo {
			t.Errorf("storage.Window(%d, %d) = %d, %d, %d; want %d, %d, %d", c.off, c.n, lo, hi, pad, c.lo, c.hi, c.pad)
		}
		if lo%storage.Alignment != 0 || hi%storage.Alignment != 0 || lo > c.off || hi < c.off+c.n {
			t.Errorf("storage.Window(%d, %d) does not enclose", c.off, c.n)
		}
	}
}

// testFile writes size random bytes in dir.
func testFile(t *testing.T, dir string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(7, uint64(size)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p := filepath.Join(dir, "blob")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

// boundaryReads checks reads around 4096 boundaries and the file end.
func boundaryReads(t *testing.T, d *storage.Reader, data []byte) {
	t.Helper()
	size := int64(len(data))
	buf, err := storage.AllocAligned(4 * storage.Alignment * 2)
	if err != nil {
		t.Fatal(err)
	}
	defer storage.FreeAligned(buf)
	for _, off := range []int64{0, 1, 4095, 4096, 4097, 8191, 8192, size - 4097, size - 4096, size - 123, size - 1, size} {
		for _, n := range []int64{0, 1, 122, 123, 4095, 4096, 4097} {
			if off+n > size {
				continue
			}
			p, err := d.ReadAligned(buf, off, n)
			if err != nil {
				t.Fatalf("off %d n %d: %v", off, n, err)
			}
			if !bytes.Equal(p, data[off:off+n]) {
				t.Fatalf("off %d n %d: wrong bytes", off, n)
			}
		}
	}
	// Past the end: short read, never success.
	for _, c := range [][2]int64{{size - 10, 11}, {size, 1}, {size + 4096, 1}} {
		if _, err := d.ReadAligned(buf, c[0], c[1]); !errors.Is(err, storage.ErrShortRead) {
			t.Errorf("read %v past EOF: %v", c, err)
		}
	}
}

// checkedReader writes a test file of size bytes in dir, opens it with
// OpenReader (closed when the test ends) and checks the boundary reads on it.
func checkedReader(t *testing.T, dir string, size int) *storage.Reader {
	t.Helper()
	p, data := testFile(t, dir, size)
	d, err := storage.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	boundaryReads(t, d, data)
	return d
}

func TestDirectReadFile(t *testing.T) {
	dir := t.TempDir()
	d := checkedReader(t, dir, 3*storage.Alignment+123)
	t.Logf("mode on %s: %v (reason %v)", dir, d.Mode(), d.FallbackReason())
	if d.Mode() == storage.ModeDirect {
		buf, _ := storage.AllocAligned(3 * storage.Alignment)
		defer storage.FreeAligned(buf)
		if _, err := d.ReadAligned(buf[1:], 0, 10); !errors.Is(err, storage.ErrUnaligned) {
			t.Errorf("unaligned buffer: %v", err)
		}
		if _, err := d.ReadAligned(buf[:storage.Alignment:storage.Alignment], 4000, 200); !errors.Is(err, storage.ErrUnaligned) {
			t.Errorf("small buffer: %v", err)
		}
	}
}

func TestDirectOnTmpfs(t *testing.T) {
	// Older kernels refuse O_DIRECT on tmpfs (newer ones accept it); either
	// way the reads must be right and the mode reported.
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "st-direct")
	if err != nil {
		t.Skipf("cannot create a directory in /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // after the reader is closed
	d := checkedReader(t, dir, 2*storage.Alignment+7)
	t.Logf("tmpfs: mode %v, reason %v", d.Mode(), d.FallbackReason())
}

// einvalReader refuses every read the way a file system without O_DIRECT
// support does at read time.
type einvalReader struct{}

func (einvalReader) ReadAt([]byte, int64) (int, error) { return 0, syscall.EINVAL }

func TestDirectFallback(t *testing.T) {
	p, data := testFile(t, t.TempDir(), 2*storage.Alignment+50)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Refused at read time: switches to buffered and says why.
	d := storage.NewDirectReader(einvalReader{}, f)
	if d.Mode() != storage.ModeDirect {
		t.Fatal("starts direct")
	}
	boundaryReads(t, d, data)
	if d.Mode() != storage.ModeBuffered || !errors.Is(d.FallbackReason(), syscall.EINVAL) {
		t.Errorf("mode %v reason %v", d.Mode(), d.FallbackReason())
	}
	// Refused at open time: the descriptor cannot be opened.
	d2 := storage.NewReader(f, filepath.Join(t.TempDir(), "missing"))
	if d2.Mode() != storage.ModeBuffered || d2.FallbackReason() == nil {
		t.Errorf("open fallback: mode %v reason %v", d2.Mode(), d2.FallbackReason())
	}
	boundaryReads(t, d2, data)
}
