package rans

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

const (
	testRows = 64
	testCols = 256
)

// expertRule is the caller's rule in these tests (the model's names).
func expertRule(name string) (string, bool) {
	if strings.Contains(name, ".experts.") && strings.HasSuffix(name, ".weight_packed") {
		return strings.TrimSuffix(name, "_packed") + "_scale", true
	}
	if strings.HasSuffix(name, ".int4row.weight") {
		return strings.TrimSuffix(name, ".weight") + ".scale", true
	}
	return "", false
}

// writeTestCheckpoint writes a two-shard checkpoint with MXFP4 experts,
// one int4-row matrix, an uncoded BF16 tensor, a config and a nested file.
func writeTestCheckpoint(t *testing.T, dir string) {
	rng := rand.New(rand.NewPCG(11, 12))
	var shards [][]safetensors.WriteTensor
	for s := range 2 {
		var ts []safetensors.WriteTensor
		for e := range 2 {
			for _, w := range []string{"w1", "w2", "w3"} {
				p := "model.layers." + itoa(s) + ".block_sparse_moe.experts." + itoa(e) + "." + w
				sc := make([]byte, testRows*testCols/32)
				for i := range sc {
					sc[i] = byte(119 + rng.IntN(4))
				}
				ts = append(ts,
					safetensors.WriteTensor{Name: p + ".weight_packed", DType: safetensors.U8, Shape: []int64{testRows, testCols / 2},
						Data: gaussianInt4(rng, testRows*testCols/2, 2.0)},
					safetensors.WriteTensor{Name: p + ".weight_scale", DType: safetensors.U8, Shape: []int64{testRows, testCols / 32}, Data: sc})
			}
		}
		norm := make([]byte, 2*testCols)
		for i := range norm {
			norm[i] = byte(rng.Uint32())
		}
		ts = append(ts, safetensors.WriteTensor{Name: "model.layers." + itoa(s) + ".norm.weight", DType: safetensors.BF16, Shape: []int64{testCols}, Data: norm})
		shards = append(shards, ts)
	}
	sc := make([]byte, 4*testRows)
	for i := range testRows {
		binary.LittleEndian.PutUint32(sc[4*i:], math.Float32bits(0.01*float32(i+1)))
	}
	shards[1] = append(shards[1],
		safetensors.WriteTensor{Name: "extra.int4row.weight", DType: safetensors.U8, Shape: []int64{testRows, testCols / 2}, Data: gaussianInt4(rng, testRows*testCols/2, 1.5)},
		safetensors.WriteTensor{Name: "extra.int4row.scale", DType: safetensors.F32, Shape: []int64{testRows}, Data: sc})
	// A third shard with nothing to code is linked, not rewritten.
	shards = append(shards, []safetensors.WriteTensor{{Name: "lm_head.weight", DType: safetensors.BF16, Shape: []int64{4, 4}, Data: make([]byte, 32)}})
	require.NoError(t, safetensors.WriteSharded(dir, shards, map[string]string{"format": "pt"}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"x":1}`), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tok"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tok", "tiktoken.model"), []byte("abc"), 0o644))
}

// tensorBytes returns the bytes of the tensor named name in ck.
func tensorBytes(t *testing.T, ck *safetensors.Checkpoint, name string) []byte {
	t.Helper()
	tt, ok := ck.Tensor(name)
	require.True(t, ok, "no tensor %s", name)
	b, err := ck.Bytes(tt)
	require.NoError(t, err)
	return b
}

// openPair opens the source checkpoint and its repacked copy, closed when
// the test ends.
func openPair(t *testing.T, src, out string) (a, b *safetensors.Checkpoint) {
	t.Helper()
	a, err := safetensors.Open(src)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = safetensors.Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return a, b
}

func repackTest(t *testing.T) (src, out string, man *Manifest) {
	src, out = t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeTestCheckpoint(t, src)
	var events []Progress
	man, err := Repack(src, out, RepackOptions{Select: expertRule, Progress: func(p Progress) { events = append(events, p) }, Workers: 2})
	require.NoError(t, err)
	require.Len(t, man.Tensors, 13)
	last := Progress{}
	for _, e := range events {
		if e.Op == "code" {
			last = e
		}
	}
	require.Equal(t, 13, last.Tensors)
	require.Equal(t, last.TotalBytes, last.Bytes)
	return src, out, man
}

func TestRepackAndVerify(t *testing.T) {
	src, out, man := repackTest(t)
	rep, err := Verify(out, VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, 13, rep.Tensors)
	dec, stored := man.Totals()
	require.Equal(t, dec, rep.DecodedBytes)
	require.Less(t, stored, dec*85/100, "Gaussian int4 codes must shrink")

	a, b := openPair(t, src, out)
	require.True(t, b.HasIndex())
	require.Equal(t, a.Len(), b.Len())
	stamps, err := quant.LoadStamps(b.Metadata())
	require.NoError(t, err)
	require.Equal(t, 13, stamps.Len())
	var d Decoder
	for _, ta := range a.Tensors() {
		tb, ok := b.Tensor(ta.Name)
		require.True(t, ok, ta.Name)
		require.Equal(t, filepath.Base(ta.File), filepath.Base(tb.File))
		want, err := a.Bytes(ta)
		require.NoError(t, err)
		st, err := Inspect(b, stamps, tb)
		require.NoError(t, err)
		_, coded := expertRule(ta.Name)
		require.Equal(t, coded, st.Coded, ta.Name)
		if !coded {
			got, err := b.Bytes(tb)
			require.NoError(t, err)
			require.Equal(t, want, got, ta.Name)
			continue
		}
		wantFmt := quant.MXFP4CFS1
		if strings.HasPrefix(ta.Name, "extra.") {
			wantFmt = quant.Int4RowCFS1
		}
		require.Equal(t, wantFmt, st.Format, ta.Name)
		require.Equal(t, int(ta.Size), st.DecodedLen)
		got := make([]byte, st.DecodedLen)
		require.NoError(t, d.DecodeTensor(b, tb, st, got))
		require.Equal(t, want, got, ta.Name)
	}
	// Other files are carried over; the shard without coded tensors is a hard link.
	cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, string(cfg))
	_, err = os.Stat(filepath.Join(out, "tok", "tiktoken.model"))
	require.NoError(t, err)
	fa, err := os.Stat(filepath.Join(src, safetensors.ShardFileName(3, 3)))
	require.NoError(t, err)
	fb, err := os.Stat(filepath.Join(out, safetensors.ShardFileName(3, 3)))
	require.NoError(t, err)
	require.True(t, os.SameFile(fa, fb))
	// The shard's metadata is kept beside the stamps.
	for sh, m := range b.Metadata() {
		require.Equal(t, "pt", m["format"], sh)
	}
}

func TestRepackDeterministic(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src)
	var outs []string
	for _, w := range []int{1, 2} {
		out := filepath.Join(t.TempDir(), "o")
		_, err := Repack(src, out, RepackOptions{Select: expertRule, Workers: w})
		require.NoError(t, err)
		outs = append(outs, out)
	}
	for _, name := range []string{safetensors.ShardFileName(1, 3), safetensors.ShardFileName(2, 3), safetensors.IndexFileName, ManifestFileName} {
		x, err := os.ReadFile(filepath.Join(outs[0], name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(outs[1], name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), name)
	}
}

func TestRepackRefusals(t *testing.T) {
	src := t.TempDir()
	writeTestCheckpoint(t, src)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "junk"), nil, 0o644))
	_, err := Repack(src, out, RepackOptions{Select: expertRule})
	require.ErrorIs(t, err, ErrOutputNotEmpty)
	// A selection naming a tensor of another format is refused before writing.
	_, err = Repack(src, filepath.Join(t.TempDir(), "o"), RepackOptions{Select: func(n string) (string, bool) {
		return "lm_head.weight", strings.HasSuffix(n, "norm.weight")
	}})
	require.ErrorIs(t, err, ErrNotSelectable)
	// Writing over the source is refused, even with Force.
	_, err = Repack(src, src, RepackOptions{Select: expertRule, Force: true})
	require.ErrorContains(t, err, "source directory")
	_, err = Repack(src, filepath.Join(src, "coded"), RepackOptions{Select: expertRule})
	require.ErrorContains(t, err, "inside the source")
	// Re-coding a coded checkpoint is refused.
	o1 := filepath.Join(t.TempDir(), "o")
	_, err = Repack(src, o1, RepackOptions{Select: expertRule})
	require.NoError(t, err)
	_, err = Repack(o1, filepath.Join(t.TempDir(), "o"), RepackOptions{Select: expertRule})
	require.ErrorIs(t, err, ErrNotSelectable)
}

// rewriteShard rewrites one shard of dir with edit applied to its tensors and
// metadata.
func rewriteShard(t *testing.T, dir, shard string, edit func(name string, data []byte) []byte, meta func(map[string]string)) {
	ck, err := safetensors.Open(filepath.Join(dir, shard))
	require.NoError(t, err)
	var ws []safetensors.WriteTensor
	for _, tn := range ck.Tensors() {
		b, err := ck.Read(tn)
		require.NoError(t, err)
		ws = append(ws, safetensors.WriteTensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Data: edit(tn.Name, b)})
	}
	m := ck.Metadata()[shard]
	require.NoError(t, ck.Close())
	meta(m)
	path := filepath.Join(dir, shard)
	require.NoError(t, os.Remove(path)) // break the hard link
	require.NoError(t, safetensors.WriteFile(path, ws, m))
}

func TestVerifyDetectsDamage(t *testing.T) {
	victim := "model.layers.0.block_sparse_moe.experts.1.w2.weight_packed"
	shard := safetensors.ShardFileName(1, 3)
	t.Run("payload flip", func(t *testing.T) {
		_, out, _ := repackTest(t)
		rewriteShard(t, out, shard, func(n string, b []byte) []byte {
			if n == victim {
				b[len(b)/2] ^= 0x10
			}
			return b
		}, func(map[string]string) {})
		_, err := Verify(out, VerifyOptions{})
		require.Error(t, err)
		require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMismatch), "%v", err)
		require.Contains(t, err.Error(), victim)
	})
	t.Run("stamp removed", func(t *testing.T) {
		_, out, _ := repackTest(t)
		rewriteShard(t, out, shard, func(_ string, b []byte) []byte { return b }, func(m map[string]string) {
			delete(m, quant.StampKey)
		})
		_, err := Verify(out, VerifyOptions{})
		require.ErrorIs(t, err, ErrUnstamped)
		ck, err := safetensors.Open(out)
		require.NoError(t, err)
		defer ck.Close()
		st, err := quant.LoadStamps(ck.Metadata())
		require.NoError(t, err)
		tn, _ := ck.Tensor(victim)
		_, err = Inspect(ck, st, tn)
		require.ErrorIs(t, err, ErrUnstamped)
	})
	t.Run("manifest digest", func(t *testing.T) {
		_, out, _ := repackTest(t)
		p := filepath.Join(out, ManifestFileName)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		i := bytes.Index(b, []byte(`"sha256": "`)) + len(`"sha256": "`)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		require.NoError(t, os.WriteFile(p, b, 0o644))
		_, err = Verify(out, VerifyOptions{})
		require.ErrorIs(t, err, ErrMismatch)
	})
}

// TestDecodedSlotMatVecIdentical: decoding a coded expert into a slot and
// running the MXFP4 kernel gives the same bits as the raw tensor.
func TestDecodedSlotMatVecIdentical(t *testing.T) {
	src, out, _ := repackTest(t)
	a, b := openPair(t, src, out)
	stamps, err := quant.LoadStamps(b.Metadata())
	require.NoError(t, err)
	x := testkit.Gaussian(rand.New(rand.NewPCG(1, 9)), testCols, 1)
	name := "model.layers.1.block_sparse_moe.experts.0.w3"
	raw, sc := tensorBytes(t, a, name+".weight_packed"), tensorBytes(t, a, name+".weight_scale")
	codedT, _ := b.Tensor(name + ".weight_packed")
	st, err := Inspect(b, stamps, codedT)
	require.NoError(t, err)
	slot := make([]byte, st.DecodedLen)
	var d Decoder
	require.NoError(t, d.DecodeTensor(b, codedT, st, slot))
	m1, err := quant.NewMXFP4(testRows, testCols, raw, sc)
	require.NoError(t, err)
	m2, err := quant.NewMXFP4(testRows, testCols, slot, sc)
	require.NoError(t, err)
	y1, y2 := make([]float32, testRows), make([]float32, testRows)
	m1.MatVec(y1, x)
	m2.MatVec(y2, x)
	testkit.RequireSameBits(t, "decoded slot MatVec", y2, y1)
}

func TestMetadataCanonical(t *testing.T) {
	m, err := Metadata("s", map[string]string{"k": "v", quant.StampKey: `{"a":"mxfp4"}`}, map[string]string{"b<&>": "mxfp4-cfs1"})
	require.NoError(t, err)
	require.Equal(t, `{"a":"mxfp4","b<&>":"mxfp4-cfs1"}`, m[quant.StampKey])
	require.Equal(t, `["mxfp4","mxfp4-cfs1"]`, m[FormatsKey])
	require.Equal(t, "v", m["k"])
	_, err = Metadata("s", map[string]string{quant.StampKey: `{"a":"mxfp4"}`}, map[string]string{"a": "mxfp4-cfs1"})
	require.Error(t, err)
}

func TestRepackForceAndModes(t *testing.T) {
	src, out, _ := repackTest(t)
	for _, name := range []string{safetensors.IndexFileName, ManifestFileName, safetensors.ShardFileName(1, 3)} {
		fi, err := os.Stat(filepath.Join(out, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), name)
	}
	// Repacking into the same directory again (links fail: the files exist,
	// so they are copied) gives the same checkpoint.
	before, err := os.ReadFile(filepath.Join(out, ManifestFileName))
	require.NoError(t, err)
	_, err = Repack(src, out, RepackOptions{Select: expertRule, Force: true})
	require.NoError(t, err)
	after, err := os.ReadFile(filepath.Join(out, ManifestFileName))
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = Verify(out, VerifyOptions{Workers: 1})
	require.NoError(t, err)
}

// TestRepackSymlinkedSource: a checkpoint whose files are relative symbolic
// links into a blob store (the Hugging Face cache layout) repacks into a
// complete output of real files — the configuration, the tokenizer directory
// and the shard with nothing to code included, none of them a link left
// dangling — and an output reached through a link into the source is refused.
func TestRepackSymlinkedSource(t *testing.T) {
	real := t.TempDir()
	writeTestCheckpoint(t, real)
	root := t.TempDir()
	blobs, snap := filepath.Join(root, "blobs"), filepath.Join(root, "snapshots", "main")
	require.NoError(t, os.MkdirAll(blobs, 0o755))
	require.NoError(t, os.MkdirAll(snap, 0o755))
	ents, err := os.ReadDir(real)
	require.NoError(t, err)
	for _, e := range ents {
		blob := filepath.Join(blobs, e.Name()+".blob")
		require.NoError(t, os.Rename(filepath.Join(real, e.Name()), blob))
		// Relative, as the cache writes them: valid only from where they sit.
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", e.Name()+".blob"), filepath.Join(snap, e.Name())))
	}

	out := filepath.Join(t.TempDir(), "out")
	_, err = Repack(snap, out, RepackOptions{Select: expertRule, Workers: 2})
	require.NoError(t, err)
	for _, name := range []string{"config.json", filepath.Join("tok", "tiktoken.model"), "model-00003-of-00003.safetensors"} {
		fi, err := os.Lstat(filepath.Join(out, name))
		require.NoError(t, err, "%s missing from the output", name)
		require.True(t, fi.Mode().IsRegular(), "%s is %v, want a regular file", name, fi.Mode())
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, string(b))
	_, err = Verify(out, VerifyOptions{})
	require.NoError(t, err)

	// A link inside the source pointing at a new directory there: the
	// output would be written into the source.
	require.NoError(t, os.Symlink(blobs, filepath.Join(root, "into-blobs")))
	_, err = Repack(snap, filepath.Join(root, "into-blobs", "coded"), RepackOptions{Select: expertRule})
	require.NoError(t, err, "an output beside the source through a link is allowed")
	require.NoError(t, os.Symlink(".", filepath.Join(snap, "self")))
	_, err = Repack(snap, filepath.Join(t.TempDir(), "o"), RepackOptions{Select: expertRule})
	require.ErrorContains(t, err, "cycle")
	require.NoError(t, os.Remove(filepath.Join(snap, "self")))
	link := filepath.Join(t.TempDir(), "to-source")
	require.NoError(t, os.Symlink(snap, link))
	_, err = Repack(snap, filepath.Join(link, "coded"), RepackOptions{Select: expertRule})
	require.ErrorContains(t, err, "inside the source")
}
