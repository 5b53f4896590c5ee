package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
