package safetensors

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/storage"
)

// faultReader serves data but injects faults.
type faultReader struct {
	data     []byte
	maxChunk int   // serve at most this many bytes per call (0 = all)
	eintr    int   // fail this many calls with EINTR first
	cut      int64 // pretend the data ends here (short read)
	calls    int
}

func (r *faultReader) ReadAt(p []byte, off int64) (int, error) {
	r.calls++
	if r.eintr > 0 {
		r.eintr--
		return 0, syscall.EINTR
	}
	end := int64(len(r.data))
	if r.cut > 0 && r.cut < end {
		end = r.cut
	}
	if off >= end {
		return 0, io.EOF
	}
	n := copy(p, r.data[off:end])
	if r.maxChunk > 0 && n > r.maxChunk {
		n = r.maxChunk
	}
	if n < len(p) && off+int64(n) >= end {
		return n, io.EOF
	}
	return n, nil
}

func TestReadFullFaults(t *testing.T) {
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	dst := make([]byte, 5000)
	r := &faultReader{data: data, maxChunk: 333, eintr: 3}
	if err := readFull(r, dst, 4000); err != nil || !bytes.Equal(dst, data[4000:9000]) {
		t.Errorf("chunked+EINTR: %v", err)
	}
	if r.calls < 5000/333+3 {
		t.Errorf("only %d calls", r.calls)
	}
	if err := readFull(&faultReader{data: data, cut: 8000}, dst, 4000); !errors.Is(err, ErrShortRead) {
		t.Errorf("short read: %v", err)
	}
	if err := readFull(&faultReader{data: data}, dst, 6000); !errors.Is(err, ErrShortRead) {
		t.Errorf("read past EOF: %v", err)
	}

	// Direct mode through the seam: a window cut before the payload ends is
	// an error; a window cut after it is success.
	buf := directBuf(t)
	d := storage.NewDirectReader(&faultReader{data: data, cut: 5000, maxChunk: 1000, eintr: 1}, nil)
	if p, err := d.ReadAligned(buf, 4500, 500); err != nil || !bytes.Equal(p, data[4500:5000]) {
		t.Errorf("payload ends at cut: %v", err)
	}
	if _, err := d.ReadAligned(buf, 4500, 501); !errors.Is(err, ErrShortRead) {
		t.Errorf("payload past cut: %v", err)
	}
}

// faultFile is a File over a faultReader, for WithOpener.
type faultFile struct {
	*faultReader
	name string
	size int64
}

func (f *faultFile) Close() error               { return nil }
func (f *faultFile) Stat() (fs.FileInfo, error) { return fakeInfo{f.name, f.size}, nil }

type fakeInfo struct {
	name string
	size int64
}

func (i fakeInfo) Name() string       { return i.name }
func (i fakeInfo) Size() int64        { return i.size }
func (i fakeInfo) Mode() fs.FileMode  { return 0o444 }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return false }
func (i fakeInfo) Sys() any           { return nil }

func TestOpenerFaults(t *testing.T) {
	src := filepath.Join(fixturesST(t), st1)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// The data section is cut 100 bytes before the file's claimed end.
	cut := int64(len(data) - 100)
	opener := func(path string) (storage.File, error) {
		return &faultFile{faultReader: &faultReader{data: data, cut: cut, maxChunk: 64, eintr: 2}, name: filepath.Base(path), size: int64(len(data))}, nil
	}
	c := mustOpen(t, src, WithOpener(opener))
	ok := mustTensor(t, c, "plain.f32.2d")
	b, err := c.Bytes(ok)
	ind := readIndep(t, src)
	if err != nil || !bytes.Equal(b, ind.data("plain.f32.2d")) {
		t.Errorf("Bytes through opener: %v", err)
	}
	bad := mustTensor(t, c, "rank3.f32") // ends 16 bytes before EOF, past the cut
	buf := directBuf(t)
	if _, err := c.Bytes(bad); !errors.Is(err, ErrShortRead) {
		t.Errorf("Bytes: %v", err)
	}
	if err := c.ReadAt(bad, make([]byte, bad.Size), 0); !errors.Is(err, ErrShortRead) {
		t.Errorf("ReadAt: %v", err)
	}
	if _, err := c.ReadF32(bad); !errors.Is(err, ErrShortRead) {
		t.Errorf("ReadF32: %v", err)
	}
	var e *Error
	_, mode, err := c.ReadDirect(bad, buf)
	if !errors.Is(err, ErrShortRead) || mode != storage.ModeBuffered || !errors.As(err, &e) || e.Tensor != "rank3.f32" {
		t.Errorf("ReadDirect: %v %v", mode, err)
	}
	// A header cut short fails the open.
	_, err = Open(src, WithOpener(func(path string) (storage.File, error) {
		return &faultFile{faultReader: &faultReader{data: data, cut: 500}, name: "x", size: int64(len(data))}, nil
	}))
	if !errors.Is(err, ErrShortRead) || !errors.As(err, &e) || e.File != src {
		t.Errorf("cut header: %v", err)
	}
}

func fixturesST(t *testing.T) string { return testkit.Path(t, "st") }

func TestCheckpointReadDirect(t *testing.T) {
	dir := stCopy(t)
	c := mustOpen(t, dir)
	buf := directBuf(t)
	readDirectAll(t, c, buf, c.DirectMode)
	t.Logf("mode in %s: %v; warnings %v", dir, c.DirectMode(c.Tensors()[0]), c.Warnings())
	c2 := mustOpen(t, dir, WithoutDirectIO())
	tt := c2.Tensors()[3]
	if p, mode, err := c2.ReadDirect(tt, buf); err != nil || mode != storage.ModeBuffered || !bytes.Equal(p, readIndep(t, tt.File).data(tt.Name)) {
		t.Errorf("WithoutDirectIO: %v %v", mode, err)
	}
	for _, a := range []Advice{AdviceWillNeed, AdviceSequential, AdviceRandom, AdviceNormal, AdviceDontNeed} {
		if _, err := c.Bytes(tt2(c)); err != nil {
			t.Fatal(err)
		}
		if err := c.Advise(tt2(c), a); err != nil {
			t.Errorf("Advise %v: %v", a, err)
		}
	}
	if err := c.Advise(tt2(c), Advice(99)); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("bad advice: %v", err)
	}
	c.Close()
	if _, err := c.Bytes(tt2(c)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func tt2(c *Checkpoint) *Tensor { return c.Tensors()[0] }

func TestCheckpointDirectFallbackReported(t *testing.T) {
	dir := stCopy(t)
	var warned []string
	refuse := func(o *options) {
		// O_DIRECT cannot be had: the second descriptor's path does not exist.
		o.openDirect = func(f *os.File, path string) *storage.Reader {
			return storage.NewReader(f, filepath.Join(dir, "no-such-file"))
		}
	}
	c := mustOpen(t, dir, refuse, WithWarnings(func(s string) { warned = append(warned, s) }))
	readDirectAll(t, c, directBuf(t), func(*Tensor) storage.Mode { return storage.ModeBuffered })
	// One warning per shard, naming it and the reason.
	if len(warned) != 2 || !strings.Contains(warned[0], "model-0000") || !strings.Contains(warned[0], "no such file") {
		t.Errorf("warnings %q", warned)
	}
}

// readDirectAll reads every tensor of c into buf with ReadDirect, failing
// the test unless it gets the bytes an independent parse of the shard finds,
// in the mode wantMode gives for the tensor.
func readDirectAll(t *testing.T, c *Checkpoint, buf []byte, wantMode func(*Tensor) storage.Mode) {
	t.Helper()
	for _, tt := range c.Tensors() {
		p, mode, err := c.ReadDirect(tt, buf)
		if err != nil || !bytes.Equal(p, readIndep(t, tt.File).data(tt.Name)) {
			t.Fatalf("%s: %v", tt.Name, err)
		}
		if want := wantMode(tt); mode != want {
			t.Errorf("%s: read in mode %v, want %v", tt.Name, mode, want)
		}
	}
}

// directBuf returns an aligned buffer of four alignment units, enough for
// ReadDirect of any fixture tensor, freed when the test ends.
func directBuf(t *testing.T) []byte {
	t.Helper()
	buf, err := storage.AllocAligned(4 * storage.Alignment)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { storage.FreeAligned(buf) })
	return buf
}
