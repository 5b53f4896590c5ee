package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, WriteSharded(dir, shards, nil))
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
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	return ck
}

func TestWriteShardedCreatesDir(t *testing.T) {
	dir, want := faultCkpt(t)
	ck, err := Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	assert.Equal(t, len(want), ck.Len())
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
			assert.ErrorIs(t, err, syscall.EIO)
		}},
		{"short read", func(x *faultfs.FS, d int64) { x.Short(shard1, d+100) }, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, ErrShortRead)
		}},
		{"shrunk after open", func(x *faultfs.FS, d int64) { x.Shrink(shard1, d+100) }, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, ErrShortRead)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := faultfs.New()
			ck := openFaulty(t, dir, x)
			tt, ok := ck.Tensor("ta0")
			require.True(t, ok)
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
					require.NoError(t, err)
					defer storage.FreeAligned(buf)
					p, _, err := ck.ReadDirect(tt, buf)
					if err != nil {
						return nil, err
					}
					return append([]byte(nil), p...), nil
				}},
			} {
				got, err := read.fn()
				require.Error(t, err, read.name)
				assert.True(t, got == nil, "%s returned %d bytes with its error", read.name, len(got))
				tc.check(t, err)
				assert.Contains(t, err.Error(), shard1, read.name)
				assert.Contains(t, err.Error(), `"ta0"`, read.name)
			}
			// Other shards are unaffected.
			tb, _ := ck.Tensor("tb1")
			got, err := ck.Read(tb)
			require.NoError(t, err)
			assert.Equal(t, want["tb1"], got)
		})
	}
	t.Run("shrunk before open", func(t *testing.T) {
		x := faultfs.New()
		x.Shrink(shard1, 1000)
		_, err := Open(dir, WithOpener(func(p string) (storage.File, error) { return x.Open(p) }))
		assert.ErrorIs(t, err, ErrDataBeyondFile)
	})
	t.Run("flipped header byte", func(t *testing.T) {
		x := faultfs.New()
		x.Flip(shard1, 8, 0) // '{' → 'z'
		_, err := Open(dir, WithOpener(func(p string) (storage.File, error) { return x.Open(p) }))
		assert.ErrorIs(t, err, ErrNotObject)
	})
}

// A shard truncated underneath its mapping: the access faults with SIGBUS,
// and Guard turns that into ErrFault naming the shard; CheckSizes and a
// fresh Bytes call report the shrink.
func TestTruncatedWhileMapped(t *testing.T) {
	dir, want := faultCkpt(t)
	ck, err := Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	tt, _ := ck.Tensor("ta2") // the shard's last tensor
	view, err := ck.Bytes(tt)
	require.NoError(t, err)
	require.Equal(t, want["ta2"], view)
	path := filepath.Join(dir, ShardFileName(1, 2))
	require.NoError(t, os.Truncate(path, tt.Offset)) // whole pages of the view are gone

	var sum int
	err = ck.Guard(func() {
		for _, b := range view {
			sum += int(b)
		}
	})
	require.ErrorIs(t, err, ErrFault)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "changed since open")

	err = ck.CheckSizes()
	assert.ErrorIs(t, err, ErrShortRead)
	assert.Contains(t, err.Error(), path)

	// Reads through pread see the short file.
	_, err = ck.Read(tt)
	assert.ErrorIs(t, err, ErrShortRead)

	// Non-fault panics pass through Guard unchanged.
	assert.PanicsWithValue(t, "boom", func() { _ = ck.Guard(func() { panic("boom") }) })
	assert.NoError(t, ck.Guard(func() {}))
}

// A shard that shrank by less than a page before its first mapping is
// refused when mapped, instead of reading a zero-filled tail.
func TestShrunkBeforeMapping(t *testing.T) {
	dir, _ := faultCkpt(t)
	ck, err := Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	tt, _ := ck.Tensor("tb2")
	path := filepath.Join(dir, ShardFileName(2, 2))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-10))
	_, err = ck.Bytes(tt)
	assert.ErrorIs(t, err, ErrShortRead)
	assert.Contains(t, err.Error(), "shrank")
	assert.ErrorIs(t, ck.CheckSizes(), ErrShortRead)
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
				require.NoError(t, os.Remove(filepath.Join(dir, IndexFileName)))
			}
			require.NoError(t, os.Remove(target))
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
				assert.ErrorIs(t, err, ErrNotRegular)
				assert.Contains(t, err.Error(), filepath.Base(target))
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
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	e := `{"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}`
	_, err := Open(write(t, `{"a": `+e+`, "a": `+e+`}`, []byte{1, 2}))
	assert.ErrorIs(t, err, ErrDuplicateKey)
	for _, pad := range []string{" ", "\t", "\n", "\r\n", " \t\r\n  "} {
		ck, err := Open(write(t, `{"a": `+e+`}`+pad, []byte{1, 2}))
		require.NoError(t, err, "%q", pad)
		ck.Close()
	}
	_, err = Open(write(t, `{"a": `+e+`}`+"\v", []byte{1, 2}))
	assert.ErrorIs(t, err, ErrTrailingGarbage)
	assert.False(t, strings.Contains(ErrTrailingGarbage.Error(), "non-space"))
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
