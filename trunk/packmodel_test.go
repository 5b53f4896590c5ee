package trunk

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/quant/lossless12"
)

// embedHeadSource is l12Source's two layers plus an embedding table and a head ([32, 16] bf16
// matrices of the same file, which lossless12 shrinks).
func embedHeadSource(t *testing.T) ([][]SourceTensor, PackOptions) {
	t.Helper()
	layers := l12Source(t)
	a := layers[0][0] // a [32, 16] matrix of the source file, reused at other names
	require.Equal(t, []int64{32, 16}, a.Shape)
	emb, head := a, layers[1][0]
	emb.Name, head.Name = "embed", "head"
	return layers, PackOptions{Format: FormatLossless12, Embedding: &emb, Head: &head}
}

// TestPackEmbedHead: a pack given the embedding table and the head writes each after the layers
// in a run of its own with its sha256, encoded (and decoding to its source's bytes); OpenPacked
// serves them, Checksums lists them as Embed and Head, and Verify reads them: a flipped bit fails
// the run's checksum, a malformed block under a matching checksum is refused by name, each a
// *LayerError of the run's item.
func TestPackEmbedHead(t *testing.T) {
	layers, o := embedHeadSource(t)
	dir := t.TempDir()
	_, err := Pack(dir, layers, o)
	require.NoError(t, err)
	l, err := ReadLayout(dir, 2, Expect{})
	require.NoError(t, err)
	require.NotNil(t, l.Embedding)
	require.NotNil(t, l.Head)
	bin, err := os.ReadFile(filepath.Join(dir, BinName))
	require.NoError(t, err)
	last := l.Layers[1]
	for _, c := range []struct {
		r    *LayerRun
		item int
		src  *SourceTensor
	}{{l.Embedding, Embed, o.Embedding}, {l.Head, Head, o.Head}} {
		r := c.r
		assert.Equal(t, c.item, r.Layer)
		assert.GreaterOrEqual(t, r.FileOff, last.FileOff+last.NBytes, "after the layers")
		require.Len(t, r.Tensors, 1)
		rt := r.Tensors[0]
		assert.Equal(t, c.src.Name, rt.Name)
		assert.Equal(t, FormatLossless12, rt.Format)
		sum := sha256.Sum256(bin[r.FileOff : r.FileOff+r.Unpadded])
		assert.Equal(t, sum[:], r.SHA256)
		m, err := lossless12.Open(bin[r.FileOff+rt.Off : r.FileOff+rt.Off+rt.NBytes])
		require.NoError(t, err)
		raw, err := os.ReadFile(c.src.File)
		require.NoError(t, err)
		want := raw[c.src.Offset : c.src.Offset+c.src.Size]
		row := make([]byte, 2*m.Cols())
		for k := range m.Rows() {
			m.DecodeRowBF16(row, k)
			require.Equal(t, want[k*len(row):(k+1)*len(row)], row, "%s row %d", rt.Name, k)
		}
		last = *r
	}
	p, err := OpenPacked(dir, 2, Expect{}, nil)
	require.NoError(t, err)
	for _, name := range []string{"embed", "head"} {
		_, ok := p.Tensor(name)
		assert.True(t, ok, name)
		_, ok = p.Lossless12(name)
		assert.True(t, ok, name)
	}
	var items []int
	for _, c := range p.Checksums() {
		items = append(items, c.Item)
	}
	assert.Equal(t, []int{0, 1, Embed, Head}, items)
	require.NoError(t, p.Verify(nil))
	require.NoError(t, p.Close())

	flip := func(t *testing.T, r *LayerRun, at int64, b byte, reseal bool) {
		t.Helper()
		c := append([]byte(nil), bin...)
		c[r.FileOff+at] = b
		require.NoError(t, os.WriteFile(filepath.Join(dir, BinName), c, 0o644))
		js := string(goodJSON(t, dir))
		if reseal {
			sum := sha256.Sum256(c[r.FileOff : r.FileOff+r.Unpadded])
			js = strings.Replace(js, hex.EncodeToString(r.SHA256), hex.EncodeToString(sum[:]), 1)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, LayoutName), []byte(js), 0o644))
	}
	verify := func(t *testing.T) error {
		t.Helper()
		p, err := OpenPacked(dir, 2, Expect{}, nil)
		require.NoError(t, err)
		defer p.Close()
		return p.Verify(nil)
	}
	js := goodJSON(t, dir)
	defer os.WriteFile(filepath.Join(dir, LayoutName), js, 0o644)
	t.Run("flipped-bit/head", func(t *testing.T) {
		rt := l.Head.Tensors[0]
		flip(t, l.Head, rt.Off+rt.NBytes-1, bin[l.Head.FileOff+rt.Off+rt.NBytes-1]^0x01, false)
		err := verify(t)
		require.ErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), "lm_head")
		le, ok := errors.AsType[*LayerError](err)
		require.True(t, ok)
		assert.Equal(t, Head, le.Layer)
	})
	t.Run("malformed-block/embedding", func(t *testing.T) {
		rt := l.Embedding.Tensors[0]
		flip(t, l.Embedding, rt.Off+lossless12.HeaderSize, 250, true) // row 0's first window base, above MaxBase
		err := verify(t)
		require.ErrorIs(t, err, lossless12.ErrMalformed)
		assert.NotErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), "embedding: embed")
		le, ok := errors.AsType[*LayerError](err)
		require.True(t, ok)
		assert.Equal(t, Embed, le.Layer)
	})
}

// goodJSON returns dir's trunk.json as the pack wrote it (the test restores it).
func goodJSON(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, LayoutName))
	require.NoError(t, err)
	return b
}

// TestLayoutEmbedHead: trunk.json's "embedding" and "head" are optional (a layout without them
// reads as before, both nil) and, when present, checked like a layer's run and refused with
// ErrLayout by what is wrong; Expect.Tensor sees their tensors as Embed and Head.
func TestLayoutEmbedHead(t *testing.T) {
	layers, o := embedHeadSource(t)
	dir := t.TempDir()
	_, err := Pack(dir, layers, o)
	require.NoError(t, err)
	good, binSize := goodLayout(t, dir)

	var d map[string]any
	require.NoError(t, json.Unmarshal(good, &d))
	delete(d, "embedding")
	delete(d, "head")
	old, err := json.Marshal(d)
	require.NoError(t, err)
	l, err := ParseLayout(old, binSize, 2, Expect{})
	require.NoError(t, err, "a trunk.json without them")
	assert.Nil(t, l.Embedding)
	assert.Nil(t, l.Head)
	assert.Len(t, l.Runs(), 2)

	seen := map[int]string{}
	_, err = ParseLayout(good, binSize, 2, Expect{Tensor: func(layer int, t RunTensor) error {
		if layer < 0 {
			seen[layer] = t.Name
		}
		return nil
	}})
	require.NoError(t, err)
	assert.Equal(t, map[int]string{Embed: "embed", Head: "head"}, seen)
	_, err = ParseLayout(good, binSize, 2, Expect{Tensor: func(layer int, t RunTensor) error {
		if layer == Head {
			return errors.New("not the head")
		}
		return nil
	}})
	require.ErrorIs(t, err, ErrLayout)
	assert.Contains(t, err.Error(), "lm_head: head: not the head")

	run := func(d map[string]any, key string) map[string]any { return d[key].(map[string]any) }
	tensor := func(d map[string]any, key string) map[string]any {
		for _, v := range run(d, key)["tensors"].(map[string]any) {
			return v.(map[string]any)
		}
		return nil
	}
	cases := []layoutViolation{
		{"not an object", func(d map[string]any) { d["head"] = []any{} }, "head is array"},
		{"file_off missing", func(d map[string]any) { delete(run(d, "head"), "file_off") }, "file_off is missing"},
		{"unaligned", func(d map[string]any) { run(d, "embedding")["file_off"] = 4097 }, "multiples of 4096"},
		{"over the layers", func(d map[string]any) { run(d, "embedding")["file_off"] = 4096 }, "overlaps or precedes"},
		{"over the embedding", func(d map[string]any) { run(d, "head")["file_off"] = run(d, "embedding")["file_off"] }, "overlaps or precedes"},
		{"past trunk.bin", func(d map[string]any) { run(d, "head")["nbytes"] = binSize }, "ends past trunk.bin"},
		{"bad sha256", func(d map[string]any) { run(d, "head")["sha256"] = "00" }, "not 64 hex digits"},
		{"no tensors", func(d map[string]any) { run(d, "head")["tensors"] = map[string]any{} }, "not exactly one tensor"},
		{"two tensors", func(d map[string]any) {
			run(d, "head")["tensors"].(map[string]any)["more"] = tensor(d, "head")
		}, "not exactly one tensor"},
		{"not a matrix", func(d map[string]any) {
			tt := tensor(d, "head")
			tt["dtype"], tt["shape"], tt["nbytes"] = "F32", []any{8}, 32
			delete(tt, "format")
			delete(tt, "escapes")
		}, "want a BF16 or lossless12 matrix"},
		{"tensor past the run", func(d map[string]any) { tensor(d, "head")["off"] = 4096 }, "ends past the run"},
		{"format checked", func(d map[string]any) { delete(tensor(d, "embedding"), "escapes") }, "embedding: embed: format lossless12 without escapes"},
	}
	requireViolations(t, good, binSize, cases)
}

// TestChooseSource: the pack's lossless12 matrices are read as the bf16 originals only when
// both plans pin everything and there are fewer threads than the break-even; a forced source
// is obeyed; every answer says why.
func TestChooseSource(t *testing.T) {
	resident := &Plan{Lossless12Bytes: 100}
	streams := &Plan{Lossless12Bytes: 100, StreamBytes: 50}
	bf16 := &Plan{}
	cases := []struct {
		name            string
		want            Source
		packed, shards  *Plan
		threads, minThr int
		src             Source
		why             string
	}{
		{"resident, one thread", SourceAuto, resident, bf16, 1, 2, SourceShards, "fewer than 2"},
		{"resident, two threads", SourceAuto, resident, bf16, 2, 2, SourcePacked, "decoded on 2 threads"},
		{"break-even of three", SourceAuto, resident, bf16, 2, 3, SourceShards, "fewer than 3"},
		{"the pack streams", SourceAuto, streams, bf16, 1, 2, SourcePacked, "streams 50 B a pass"},
		{"the originals would stream", SourceAuto, resident, &Plan{StreamBytes: 7}, 1, 2, SourcePacked, "would stream 7 B"},
		{"no originals", SourceAuto, resident, nil, 1, 2, SourcePacked, "do not provide"},
		{"nothing encoded", SourceAuto, &Plan{}, bf16, 1, 2, SourcePacked, "no matrix"},
		{"forced pack", SourcePacked, resident, bf16, 1, 2, SourcePacked, "asked for"},
		{"forced originals", SourceShards, streams, &Plan{StreamBytes: 7}, 2, 2, SourceShards, "asked for"},
	}
	for _, c := range cases {
		src, why := ChooseSource(c.want, c.packed, c.shards, c.threads, c.minThr)
		assert.Equal(t, c.src, src, c.name)
		assert.Contains(t, why, c.why, c.name)
	}
}

// TestEmbedHeadSeed: the fuzz seed with an embedding and a head run is a valid trunk.json.
func TestEmbedHeadSeed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "trunk-embedhead.json"))
	require.NoError(t, err)
	l, err := ParseLayout(data, 16384, 2, Expect{})
	require.NoError(t, err)
	require.NotNil(t, l.Embedding)
	require.NotNil(t, l.Head)
	assert.Equal(t, FormatLossless12, l.Embedding.Tensors[0].Format)
	assert.Equal(t, FormatBF16, l.Head.Tensors[0].Format)
	assert.Nil(t, l.Head.SHA256)
	assert.Len(t, l.Checksums("trunk.bin"), 2, "layer 0 and the embedding carry a sha256")
}
