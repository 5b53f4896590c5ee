package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func randBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func sampleTensors(rng *rand.Rand) []WriteTensor {
	ts := []WriteTensor{
		{Name: "a.bf16", DType: BF16, Shape: []int64{3, 5}},
		{Name: `weird\name."with"quotes`, DType: F32, Shape: []int64{3}},
		{Name: "ctl\x01\n\tname é 😀", DType: U8, Shape: []int64{7}},
		{Name: "scalar", DType: F64, Shape: []int64{}},
		{Name: "empty", DType: F32, Shape: []int64{0, 8}},
		{Name: "f4", DType: F4, Shape: []int64{2, 6}},
		{Name: "f6", DType: F6_E3M2, Shape: []int64{4}},
		{Name: "e4", DType: F8_E4M3, Shape: []int64{2, 2, 2, 2, 2, 2, 2, 2}},
	}
	for i := range ts {
		_, nb, _ := byteSize(ts[i].DType, ts[i].Shape)
		ts[i].Data = randBytes(rng, nb)
	}
	return ts
}

func TestWriteRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ts := sampleTensors(rng)
	stream := randBytes(rng, 300)
	ts = append(ts,
		WriteTensor{Name: "hole", DType: BF16, Shape: []int64{1024, 1024}},
		WriteTensor{Name: "streamed", DType: U8, Shape: []int64{300}, Fill: func(w io.Writer) error {
			for i := 0; i < 300; i += 7 {
				if _, err := w.Write(stream[i:min(i+7, 300)]); err != nil {
					return err
				}
			}
			return nil
		}},
		WriteTensor{Name: "tail.hole", DType: F32, Shape: []int64{4096}},
	)
	meta := map[string]string{"format": "pt", "z": "last", "a": "first \"q\""}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.safetensors")
	if err := WriteFile(p, ts, meta); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	// Deterministic: a second write gives identical bytes.
	p2 := filepath.Join(dir, "y.safetensors")
	if err := WriteFile(p2, ts, meta); err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(p2)
	if !bytes.Equal(raw, raw2) {
		t.Error("two writes differ")
	}
	// Independent decode agrees with what was written.
	ind := readIndep(t, p)
	if len(ind.entries) != len(ts) || !maps(ind.meta, meta) {
		t.Fatalf("independent view: %d entries, meta %v", len(ind.entries), ind.meta)
	}
	c := mustOpen(t, p)
	if !maps(c.Metadata()["x.safetensors"], meta) {
		t.Errorf("metadata %v", c.Metadata())
	}
	for i, w := range ts {
		tt, ok := c.Tensor(w.Name)
		if !ok {
			t.Fatalf("%q missing", w.Name)
		}
		if tt.DType != w.DType || !slices.Equal(tt.Shape, w.Shape) || c.Tensors()[i] != tt {
			t.Errorf("%q: %v", w.Name, tt)
		}
		got, err := c.Bytes(tt)
		if err != nil {
			t.Fatal(err)
		}
		want := w.Data
		switch {
		case w.Fill != nil:
			want = stream
		case want == nil:
			want = make([]byte, tt.Size)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(ind.data(w.Name), want) {
			t.Errorf("%q: bytes differ", w.Name)
		}
	}
}

func TestWriteSharded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	all := sampleTensors(rng)
	shards := [][]WriteTensor{all[:3], all[3:5], all[5:]}
	dir := t.TempDir()
	if err := WriteSharded(dir, shards, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	idx1, _ := os.ReadFile(filepath.Join(dir, IndexFileName))
	files1 := map[string][]byte{}
	for i := range shards {
		files1[ShardFileName(i+1, 3)], _ = os.ReadFile(filepath.Join(dir, ShardFileName(i+1, 3)))
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasIndex() || c.Len() != len(all) || len(c.Shards()) != 3 {
		t.Fatalf("index %v, %d tensors, %d shards", c.HasIndex(), c.Len(), len(c.Shards()))
	}
	for si, sh := range shards {
		for _, w := range sh {
			tt := mustTensor(t, c, w.Name)
			b, err := c.Bytes(tt)
			if err != nil || !bytes.Equal(b, w.Data) || filepath.Base(tt.File) != ShardFileName(si+1, 3) {
				t.Errorf("%q: %v in %s", w.Name, err, tt.File)
			}
		}
	}
	c.Close()
	wm, total, err := ParseIndex(idx1)
	var sum int64
	for _, w := range all {
		sum += int64(len(w.Data))
	}
	if err != nil || total != sum || len(wm) != len(all) {
		t.Errorf("index: %v total %d (want %d) %d entries", err, total, sum, len(wm))
	}
	// Deterministic: rewrite into another dir, compare every file.
	dir2 := t.TempDir()
	if err := WriteSharded(dir2, shards, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	idx2, _ := os.ReadFile(filepath.Join(dir2, IndexFileName))
	if !bytes.Equal(idx1, idx2) {
		t.Error("index files differ")
	}
	for name, b := range files1 {
		b2, _ := os.ReadFile(filepath.Join(dir2, name))
		if !bytes.Equal(b, b2) {
			t.Errorf("%s differs", name)
		}
	}
	if err := WriteSharded(t.TempDir(), [][]WriteTensor{all[:2], all[1:3]}, nil); !errors.Is(err, ErrDuplicateTensor) {
		t.Errorf("duplicate across shards: %v", err)
	}
}

func TestWriteSparse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse.safetensors")
	const big = 1 << 30
	ts := []WriteTensor{
		{Name: "small", DType: U8, Shape: []int64{5}, Data: []byte{1, 2, 3, 4, 5}},
		{Name: "hole", DType: BF16, Shape: []int64{big / 2}},
		{Name: "tail", DType: U8, Shape: []int64{big}},
	}
	if err := WriteFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	blocks := st.Sys().(*syscall.Stat_t).Blocks * 512
	t.Logf("apparent %d bytes, allocated %d", st.Size(), blocks)
	if st.Size() < 2*big || blocks > 1<<20 {
		t.Errorf("apparent %d, allocated %d: not sparse", st.Size(), blocks)
	}
	c := mustOpen(t, p)
	tail := mustTensor(t, c, "tail")
	buf := make([]byte, 4096)
	if err := c.ReadAt(tail, buf, big-4096); err != nil || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Errorf("hole reads: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.safetensors")
	cases := []struct {
		ts   []WriteTensor
		want error
	}{
		{[]WriteTensor{{Name: "", DType: U8, Shape: []int64{1}}}, ErrInvalidName},
		{[]WriteTensor{{Name: "__metadata__", DType: U8, Shape: []int64{1}}}, ErrInvalidName},
		{[]WriteTensor{{Name: "bad\xff", DType: U8, Shape: []int64{1}}}, ErrInvalidName},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: []int64{1}}, {Name: "a", DType: U8, Shape: []int64{1}}}, ErrDuplicateKey},
		{[]WriteTensor{{Name: "a", DType: Invalid, Shape: []int64{1}}}, ErrUnknownDType},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: make([]int64, 9)}}, ErrRankTooLarge},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: []int64{-1}}}, ErrBadInteger},
		{[]WriteTensor{{Name: "a", DType: F4, Shape: []int64{3}}}, ErrSubByteAlignment},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: []int64{3}, Data: []byte{1}}}, ErrDataLength},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: []int64{3}, Fill: func(w io.Writer) error { _, err := w.Write([]byte{1}); return err }}}, ErrDataLength},
		{[]WriteTensor{{Name: "a", DType: U8, Shape: []int64{3}, Fill: func(w io.Writer) error { _, err := w.Write([]byte{1, 2, 3, 4}); return err }}}, ErrDataLength},
	}
	for i, c := range cases {
		if err := WriteFile(p, c.ts, nil); !errors.Is(err, c.want) {
			t.Errorf("%d: got %v, want %v", i, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 0 {
		t.Errorf("failed writes left files: %v", ents)
	}
}
