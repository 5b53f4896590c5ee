package safetensors

import (
	"bytes"
	"encoding/binary"
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
	"github.com/k3-project/k3/internal/testkit/faultfs"
	"github.com/k3-project/k3/storage"
)

// faultCkpt writes a two-shard checkpoint of 64 KiB tensors (so each shard
// spans many pages) and returns its directory and the tensor data.
func faultCkpt(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nested", "ckpt") // WriteSharded creates it
	want := map[string][]byte{}
	var shards [][]WriteTensor
	for s := range 2 {
		var ts []WriteTensor
		for k := range 3 {
			name := "t" + string(rune('a'+s)) + string(rune('0'+k))
			data := make([]byte, 64<<10)
			for i := range data {
				data[i] = byte(i*31 + s*7 + k)
			}
			want[name] = data
			ts = append(ts, WriteTensor{Name: name, DType: U8, Shape: []int64{int64(len(data))}, Data: data})
		}
		shards = append(shards, ts)
	}
	if err := WriteSharded(dir, shards, nil); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

func openFaulty(t *testing.T, dir string, x *faultfs.FS) *Checkpoint {
	t.Helper()
	ck, err := Open(dir, WithOpener(func(p string) (storage.File, error) {
		f, err := x.Open(p)
		if err != nil {
			return nil, err
		}
		return f, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func TestWriteShardedCreatesDir(t *testing.T) {
	dir, want := faultCkpt(t)
	ck := mustOpen(t, dir)
	if ck.Len() != len(want) {
		t.Errorf("Len %d, want %d", ck.Len(), len(want))
	}
}

// Each injected fault ends in a named error that names the shard and the
// tensor, and no call returns bytes that differ from the file.
func TestInjectedFaults(t *testing.T) {
	dir, want := faultCkpt(t)
	shard1 := ShardFileName(1, 2)
	for _, tc := range []struct {
		name   string
		inject func(x *faultfs.FS, dataStart int64)
		check  func(t *testing.T, err error)
	}{
		{"EIO", func(x *faultfs.FS, d int64) { x.EIO(shard1, d+100, 1) }, func(t *testing.T, err error) {
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("got %v, want %v", err, syscall.EIO)
			}
		}},
		{"short read", func(x *faultfs.FS, d int64) { x.Short(shard1, d+100) }, func(t *testing.T, err error) {
			if !errors.Is(err, ErrShortRead) {
				t.Errorf("got %v, want %v", err, ErrShortRead)
			}
		}},
		{"shrunk after open", func(x *faultfs.FS, d int64) { x.Shrink(shard1, d+100) }, func(t *testing.T, err error) {
			if !errors.Is(err, ErrShortRead) {
				t.Errorf("got %v, want %v", err, ErrShortRead)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := faultfs.New()
			ck := openFaulty(t, dir, x)
			tt, ok := ck.Tensor("ta0")
			if !ok {
				t.Fatal("no tensor ta0")
			}
			tc.inject(x, tt.Offset)
			for _, read := range []struct {
				name string
				fn   func() ([]byte, error)
			}{
				{"Read", func() ([]byte, error) { return ck.Read(tt) }},
				{"Bytes", func() ([]byte, error) { return ck.Bytes(tt) }},
				{"ReadF32", func() ([]byte, error) { _, err := ck.ReadF32(tt); return nil, err }},
				{"ReadDirect", func() ([]byte, error) {
					buf, err := storage.AllocAligned(int(storage.WindowLen(tt.Offset, tt.Size)))
					if err != nil {
						t.Fatal(err)
					}
					defer storage.FreeAligned(buf)
					p, _, err := ck.ReadDirect(tt, buf)
					if err != nil {
						return nil, err
					}
					return append([]byte(nil), p...), nil
				}},
			} {
				got, err := read.fn()
				if err == nil {
					t.Fatalf("%s: no error", read.name)
				}
				if got != nil {
					t.Errorf("%s returned %d bytes with its error", read.name, len(got))
				}
				tc.check(t, err)
				if !strings.Contains(err.Error(), shard1) {
					t.Errorf("%s: %q does not contain %q", read.name, err.Error(), shard1)
				}
				if !strings.Contains(err.Error(), `"ta0"`) {
					t.Errorf("%s: %q does not contain %q", read.name, err.Error(), `"ta0"`)
				}
			}
			// Other shards are unaffected.
			tb, _ := ck.Tensor("tb1")
			got, err := ck.Read(tb)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want["tb1"]) {
				t.Error("tb1: bytes differ")
			}
		})
	}
	t.Run("shrunk before open", func(t *testing.T) {
		x := faultfs.New()
		x.Shrink(shard1, 1000)
		_, err := Open(dir, WithOpener(func(p string) (storage.File, error) { return x.Open(p) }))
		if !errors.Is(err, ErrDataBeyondFile) {
			t.Errorf("got %v, want %v", err, ErrDataBeyondFile)
		}
	})
	t.Run("flipped header byte", func(t *testing.T) {
		x := faultfs.New()
		x.Flip(shard1, 8, 0) // '{' → 'z'
		_, err := Open(dir, WithOpener(func(p string) (storage.File, error) { return x.Open(p) }))
		if !errors.Is(err, ErrNotObject) {
			t.Errorf("got %v, want %v", err, ErrNotObject)
		}
	})
}

// A shard truncated underneath its mapping: the access faults with SIGBUS,
// and Guard turns that into ErrFault naming the shard; CheckSizes and a
// fresh Bytes call report the shrink.
func TestTruncatedWhileMapped(t *testing.T) {
	dir, want := faultCkpt(t)
	ck := mustOpen(t, dir)
	tt, _ := ck.Tensor("ta2") // the shard's last tensor
	view, err := ck.Bytes(tt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(view, want["ta2"]) {
		t.Fatal("ta2: view differs")
	}
	path := filepath.Join(dir, ShardFileName(1, 2))
	if err := os.Truncate(path, tt.Offset); err != nil { // whole pages of the view are gone
		t.Fatal(err)
	}

	var sum int
	err = ck.Guard(func() {
		for _, b := range view {
			sum += int(b)
		}
	})
	if !errors.Is(err, ErrFault) {
		t.Fatalf("got %v, want %v", err, ErrFault)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%q does not contain %q", err.Error(), path)
	}
	if !strings.Contains(err.Error(), "changed since open") {
		t.Errorf("%q does not contain %q", err.Error(), "changed since open")
	}

	err = ck.CheckSizes()
	if !errors.Is(err, ErrShortRead) {
		t.Errorf("got %v, want %v", err, ErrShortRead)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%q does not contain %q", err.Error(), path)
	}

	// Reads through pread see the short file.
	_, err = ck.Read(tt)
	if !errors.Is(err, ErrShortRead) {
		t.Errorf("got %v, want %v", err, ErrShortRead)
	}

	// Non-fault panics pass through Guard unchanged.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("a panic that is no fault: recovered %v, want it passed through as \"boom\"", r)
			}
		}()
		_ = ck.Guard(func() { panic("boom") })
	}()
	if err := ck.Guard(func() {}); err != nil {
		t.Error(err)
	}
}

// A shard that shrank by less than a page before its first mapping is
// refused when mapped, instead of reading a zero-filled tail.
func TestShrunkBeforeMapping(t *testing.T) {
	dir, _ := faultCkpt(t)
	ck := mustOpen(t, dir)
	tt, _ := ck.Tensor("tb2")
	path := filepath.Join(dir, ShardFileName(2, 2))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	_, err = ck.Bytes(tt)
	if !errors.Is(err, ErrShortRead) {
		t.Errorf("got %v, want %v", err, ErrShortRead)
	}
	if !strings.Contains(err.Error(), "shrank") {
		t.Errorf("%q does not contain %q", err.Error(), "shrank")
	}
	if !errors.Is(ck.CheckSizes(), ErrShortRead) {
		t.Errorf("got %v, want %v", ck.CheckSizes(), ErrShortRead)
	}
}

// A FIFO in place of a shard, a single file or the index used to block
// Open forever; each is refused at once with ErrNotRegular.
func TestFIFORefused(t *testing.T) {
	for _, where := range []string{"shard", "file", "index"} {
		t.Run(where, func(t *testing.T) {
			dir, _ := faultCkpt(t)
			target := filepath.Join(dir, ShardFileName(2, 2))
			switch where {
			case "index":
				target = filepath.Join(dir, IndexFileName)
			case "shard":
				if err := os.Remove(filepath.Join(dir, IndexFileName)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Remove(target); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(target, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			path := dir
			if where == "file" {
				path = target
			}
			done := make(chan error, 1)
			go func() {
				ck, err := Open(path)
				if err == nil {
					ck.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("got %v, want %v", err, ErrNotRegular)
				}
				if !strings.Contains(err.Error(), filepath.Base(target)) {
					t.Errorf("%q does not contain %q", err.Error(), filepath.Base(target))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Open blocked on a FIFO")
			}
		})
	}
}

// Open (not only ReadHeader) reports an identical duplicate as a duplicate,
// and accepts any JSON white space as header padding.
func TestOpenDuplicateAndPadding(t *testing.T) {
	write := func(t *testing.T, hdr string, data []byte) string {
		p := filepath.Join(t.TempDir(), "x.safetensors")
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		b = append(append(b, hdr...), data...)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e := `{"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}`
	_, err := Open(write(t, `{"a": `+e+`, "a": `+e+`}`, []byte{1, 2}))
	if !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("got %v, want %v", err, ErrDuplicateKey)
	}
	for _, pad := range []string{" ", "\t", "\n", "\r\n", " \t\r\n  "} {
		ck, err := Open(write(t, `{"a": `+e+`}`+pad, []byte{1, 2}))
		if err != nil {
			t.Fatalf("%q: %v", pad, err)
		}
		ck.Close()
	}
	_, err = Open(write(t, `{"a": `+e+`}`+"\v", []byte{1, 2}))
	if !errors.Is(err, ErrTrailingGarbage) {
		t.Errorf("got %v, want %v", err, ErrTrailingGarbage)
	}
	if strings.Contains(ErrTrailingGarbage.Error(), "non-space") {
		t.Error("want !strings.Contains(ErrTrailingGarbage.Error(), \"non-space\")")
	}
}

// FuzzFaults: one injected fault (kind, offset, bit, length) on a small
// valid file. Open and every read either fail with an error or return
// exactly the bytes the faulty storage served: never a panic, never a
// partly filled buffer.
func FuzzFaults(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	ts := []WriteTensor{
		{Name: "a", DType: F32, Shape: []int64{3, 5}, Data: make([]byte, 60)},
		{Name: "b", DType: BF16, Shape: []int64{7}, Data: make([]byte, 14)},
		{Name: "c", DType: U8, Shape: []int64{0}},
	}
	for i := range ts[0].Data {
		ts[0].Data[i] = byte(i*13 + 1)
	}
	if err := WriteFile(path, ts, map[string]string{"k": "v"}); err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	for kind := range uint8(4) {
		f.Add(kind, uint32(8), uint8(0), uint16(1))
		f.Add(kind, uint32(len(raw)-20), uint8(5), uint16(3))
	}
	f.Fuzz(func(t *testing.T, kind uint8, off uint32, bit uint8, n uint16) {
		x := faultfs.New()
		o := int64(off) % int64(len(raw)+8)
		switch kind % 4 {
		case 0:
			x.EIO("m.safetensors", o, int64(n)+1)
		case 1:
			x.Short("m.safetensors", o)
		case 2:
			x.Flip("m.safetensors", o, uint(bit))
		case 3:
			x.Shrink("m.safetensors", o)
		}
		ck, err := Open(path, WithOpener(func(p string) (storage.File, error) { return x.Open(p) }))
		if err != nil {
			return
		}
		defer ck.Close()
		for _, tt := range ck.Tensors() {
			got, err := ck.Read(tt)
			if err != nil {
				if got != nil {
					t.Fatalf("%s: %d bytes returned with %v", tt.Name, len(got), err)
				}
				continue
			}
			want := append([]byte(nil), raw[tt.Offset:tt.Offset+tt.Size]...)
			if kind%4 == 2 && o >= tt.Offset && o < tt.Offset+tt.Size {
				want[o-tt.Offset] ^= 1 << (bit & 7)
			}
			if string(got) != string(want) {
				t.Fatalf("%s: read bytes differ from the storage's", tt.Name)
			}
		}
	})
}

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
