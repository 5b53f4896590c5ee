package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/storage"
)

func TestFixtureST(t *testing.T) {
	dir := testkit.Path(t, "st")
	c := mustOpen(t, dir)
	if c.HasIndex() {
		t.Error("st/ has no index file")
	}
	shards := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	if got := c.Shards(); len(got) != 2 || filepath.Base(got[0]) != shards[0] || filepath.Base(got[1]) != shards[1] {
		t.Fatalf("shards %v", got)
	}

	// Every tensor against the independent reader.
	total := 0
	for si, sh := range shards {
		ind := readIndep(t, filepath.Join(dir, sh))
		total += len(ind.entries)
		for name, e := range ind.entries {
			tt, ok := c.Tensor(name)
			if !ok {
				t.Fatalf("tensor %q missing", name)
			}
			if tt.DType.String() != e.DType || !slices.Equal(tt.Shape, e.Shape) || filepath.Base(tt.File) != sh ||
				tt.Offset != 8+ind.n+e.Offsets[0] || tt.Size != e.Offsets[1]-e.Offsets[0] {
				t.Errorf("%s: got %v, independent %+v", name, tt, e)
			}
			if int(tt.shard) != si {
				t.Errorf("%s: shard %d", name, tt.shard)
			}
			want := ind.data(name)
			got, err := c.Bytes(tt)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: Bytes mismatch (%v)", name, err)
			}
			rd, err := c.Read(tt)
			if err != nil || !bytes.Equal(rd, want) {
				t.Errorf("%s: Read mismatch (%v)", name, err)
			}
			buf, err := storage.AllocAligned(int(storage.WindowLen(tt.Offset, tt.Size)) + storage.Alignment)
			if err != nil {
				t.Fatal(err)
			}
			p, _, err := c.ReadDirect(tt, buf)
			if err != nil || !bytes.Equal(p, want) {
				t.Errorf("%s: ReadDirect mismatch (%v)", name, err)
			}
			storage.FreeAligned(buf)
			if Widenable(tt.DType) {
				f, err := c.ReadF32(tt)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				sz := tt.DType.Bits() / 8
				if int64(len(f)) != tt.NumElements() {
					t.Fatalf("%s: %d values", name, len(f))
				}
				for i := range f {
					if w := refDecode(tt.DType, want[i*sz:(i+1)*sz]); !sameFloat(f[i], w) {
						t.Fatalf("%s[%d] = %v, reference %v", name, i, f[i], w)
					}
				}
			}
		}
		if m := c.Metadata()[sh]; !maps(m, ind.meta) {
			t.Errorf("%s metadata %v, independent %v", sh, m, ind.meta)
		}
	}
	if c.Len() != total || total != 13 {
		t.Fatalf("Len %d, independent %d (want 13)", c.Len(), total)
	}
	if _, ok := c.Tensor("__metadata__"); ok {
		t.Error("__metadata__ indexed as a tensor")
	}
	if md := c.Metadata()[shards[0]]; md["format"] != "pt" || md["note"] == "" {
		t.Errorf("metadata %v", md)
	}

	// Tensors() is in (shard, offset) order.
	ts := c.Tensors()
	for i := 1; i < len(ts); i++ {
		if ts[i].shard < ts[i-1].shard || (ts[i].shard == ts[i-1].shard && ts[i].Offset < ts[i-1].Offset) {
			t.Fatalf("Tensors not in (shard, offset) order at %d", i)
		}
	}

	// The special values §13.3 lists.
	f32 := func(name string) []float32 { return testkit.ReadNamed(t, c, name, c.ReadF32) }
	bits := func(v []float32, n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = math.Float32bits(v[i])
		}
		return out
	}
	bf := f32("plain.bf16.1d")
	if len(bf) != 128 {
		t.Fatalf("bf16 len %d", len(bf))
	}
	if got, want := bits(bf, 6), []uint32{0x7F800000, 0xFF800000, 0x7FC00000, 0, 0x80000000, 0x00800000}; !slices.Equal(got, want) {
		t.Errorf("bf16 specials %08x, want %08x", got, want)
	}
	if math.Float32frombits(0x00800000) != float32(math.Ldexp(1, -126)) {
		t.Error("min normal")
	}
	hf := f32("tricky.f16.1d")
	wantF16 := []float64{math.Inf(1), math.Inf(-1), math.NaN(), 0, math.Copysign(0, -1),
		math.Ldexp(1, -24), 1023 * math.Ldexp(1, -24), math.Ldexp(1, -14)}
	for i, w := range wantF16 {
		if !sameFloat(hf[i], w) {
			t.Errorf("f16[%d] = %v (%08x), want %v", i, hf[i], math.Float32bits(hf[i]), w)
		}
	}
	if math.Float32bits(hf[2]) != 0x7FC00000 && math.Float32bits(hf[2])&0x7F800000 != 0x7F800000 {
		t.Errorf("f16 NaN bits %08x", math.Float32bits(hf[2]))
	}
	if v := f32("scalar.f32"); len(v) != 1 || v[0] != 3.5 {
		t.Errorf("scalar %v", v)
	}
	if tt, _ := c.Tensor("scalar.f32"); len(tt.Shape) != 0 || tt.NumElements() != 1 {
		t.Errorf("scalar shape %v", tt.Shape)
	}
	if tt, _ := c.Tensor("empty.f32"); tt.Size != 0 || !slices.Equal(tt.Shape, []int64{0, 8}) || tt.NumElements() != 0 {
		t.Errorf("empty %v", tt)
	} else if b, err := c.Bytes(tt); err != nil || len(b) != 0 {
		t.Errorf("empty Bytes %v %v", b, err)
	}
	if v := f32(`weird\name."with"quotes`); !slices.Equal(v, []float32{1, 2, 3}) {
		t.Errorf("weird name %v", v)
	}
	if tt, _ := c.Tensor("rank3.f32"); !slices.Equal(tt.Shape, []int64{2, 3, 4}) {
		t.Errorf("rank3 %v", tt.Shape)
	}
	if tt, _ := c.Tensor("rank4.u8"); !slices.Equal(tt.Shape, []int64{2, 2, 2, 2}) || tt.DType != U8 {
		t.Errorf("rank4 %v", tt)
	}
	for _, n := range []string{"second.shard.f32", "second.shard.u8"} {
		if tt, ok := c.Tensor(n); !ok || filepath.Base(tt.File) != shards[1] {
			t.Errorf("%s not in the second shard", n)
		}
	}

	// Partial reads and bounds.
	tt, _ := c.Tensor("second.shard.u8")
	part := make([]byte, 10)
	if err := c.ReadAt(tt, part, 290); err != nil {
		t.Fatal(err)
	}
	ind := readIndep(t, filepath.Join(dir, shards[1]))
	if !bytes.Equal(part, ind.data("second.shard.u8")[290:]) {
		t.Error("ReadAt tail")
	}
	if err := c.ReadAt(tt, part, 291); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ReadAt past end: %v", err)
	}
	if err := c.ReadAt(tt, part, -1); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ReadAt negative: %v", err)
	}
	if _, err := c.ReadF32(mustTensor(t, c, "packed.u8.2d")); err != nil {
		t.Errorf("U8 widening: %v", err)
	}

	// A missing tensor without an index.
	_, err := c.Require("nope")
	var me *MissingTensorError
	if !errors.As(err, &me) || !errors.Is(err, ErrNotFound) || me.State != NoIndex || me.Name != "nope" {
		t.Errorf("Require: %v", err)
	}
	// A tensor from another checkpoint is refused.
	c2 := mustOpen(t, filepath.Join(dir, shards[1]))
	if c2.Len() != 3 {
		t.Errorf("single file: %d tensors", c2.Len())
	}
	if _, err := c2.Bytes(mustTensor(t, c, "plain.f32.2d")); !errors.Is(err, ErrForeignTensor) {
		t.Errorf("foreign tensor: %v", err)
	}
}

func mustTensor(t testing.TB, c *Checkpoint, name string) *Tensor {
	t.Helper()
	tt, ok := c.Tensor(name)
	if !ok {
		t.Fatalf("%q missing", name)
	}
	return tt
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestFixtureModels(t *testing.T) {
	want := map[string]struct {
		tensors, shards int
		index           bool
		totalSize       int64
	}{
		"tiny": {916, 3, true, 3_676_928},
		"wide": {4948, 1, false, -1},
	}
	for _, dir := range testkit.Models(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			c := mustOpen(t, dir)
			if w := c.Warnings(); len(w) != 0 {
				t.Errorf("warnings: %v", w)
			}
			// Independent count: every shard header through encoding/json,
			// and the index's weight_map when there is one.
			names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			indep := 0
			var sum int64
			for _, p := range names {
				ind := readIndep(t, p)
				indep += len(ind.entries)
				for n, e := range ind.entries {
					tt, ok := c.Tensor(n)
					if !ok || tt.File != p || tt.Offset != 8+ind.n+e.Offsets[0] || tt.DType.String() != e.DType || !slices.Equal(tt.Shape, e.Shape) {
						t.Fatalf("%s: %v vs %+v", n, tt, e)
					}
					sum += e.Offsets[1] - e.Offsets[0]
				}
			}
			if c.Len() != indep {
				t.Errorf("Len %d, headers hold %d", c.Len(), indep)
			}
			idx, err := os.ReadFile(filepath.Join(dir, IndexFileName))
			hasIndex := err == nil
			if hasIndex != c.HasIndex() {
				t.Errorf("HasIndex %v, file exists %v", c.HasIndex(), hasIndex)
			}
			if hasIndex {
				var x struct {
					Metadata struct {
						TotalSize int64 `json:"total_size"`
					}
					WeightMap map[string]string `json:"weight_map"`
				}
				if err := json.Unmarshal(idx, &x); err != nil {
					t.Fatal(err)
				}
				if len(x.WeightMap) != c.Len() || x.Metadata.TotalSize != sum {
					t.Errorf("index lists %d tensors / %d bytes; opened %d / %d", len(x.WeightMap), x.Metadata.TotalSize, c.Len(), sum)
				}
				for n, s := range x.WeightMap {
					if tt, ok := c.Tensor(n); !ok || filepath.Base(tt.File) != s {
						t.Fatalf("%s: index says %s", n, s)
					}
				}
				wm, ts, err := ParseIndex(idx)
				if err != nil || ts != sum || len(wm) != len(x.WeightMap) {
					t.Errorf("ParseIndex: %d entries, total %d, %v", len(wm), ts, err)
				}
				_, err = c.Require("language_model.model.nope")
				var me *MissingTensorError
				if !errors.As(err, &me) || me.State != NotReferenced {
					t.Errorf("Require: %v", err)
				}
			}
			if w, ok := want[name]; ok {
				if c.Len() != w.tensors || len(c.Shards()) != w.shards || c.HasIndex() != w.index {
					t.Errorf("%d tensors in %d shards (index %v); want %d in %d (%v)", c.Len(), len(c.Shards()), c.HasIndex(), w.tensors, w.shards, w.index)
				}
				if w.totalSize >= 0 && sum != w.totalSize {
					t.Errorf("total size %d, want %d", sum, w.totalSize)
				}
			}
			// Spot-check bytes of every tensor through mmap against the
			// independent read of the first and last tensors per shard.
			for _, p := range names {
				ind := readIndep(t, p)
				for n := range ind.entries {
					b, err := c.Bytes(mustTensor(t, c, n))
					if err != nil || !bytes.Equal(b, ind.data(n)) {
						t.Fatalf("%s: bytes differ (%v)", n, err)
					}
				}
			}
			_ = binary.LittleEndian
		})
	}
}
