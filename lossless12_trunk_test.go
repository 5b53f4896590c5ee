package k3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/trunk"
)

// packLossless12 packs dir's trunk in lossless12 and returns the directory and its layout.
func packLossless12(t *testing.T, dir string) (string, *trunk.Layout) {
	t.Helper()
	p := t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(dir, p, nil, checkpoint.WithTrunkFormat("lossless12")))
	l, err := trunk.ReadLayout(p, mustLayers(t, dir), trunk.Expect{})
	require.NoError(t, err)
	return p, l
}

// TestLossless12PackedTrunk is issue 27's acceptance on the fixture models: a trunk packed in
// lossless12 is smaller than the bf16 pack, and its tokens and logits equal the mapped bf16
// run's bit for bit at the floor, in between and all pinned, on one and two threads, read from
// the pack (every layer, the embedding and the head verified against its checksum) or from the
// checkpoint's bf16 originals (nothing of the pack read).
func TestLossless12PackedTrunk(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		bf := t.TempDir()
		require.NoError(t, checkpoint.PackTrunk(dir, bf, nil))
		l12, l := packLossless12(t, dir)
		encoded, kept := 0, 0
		for _, r := range l.Layers {
			for _, rt := range r.Tensors {
				switch rt.Format {
				case trunk.FormatLossless12:
					encoded++
				case trunk.FormatBF16:
					kept++
				}
			}
		}
		assert.Positive(t, encoded, "matrices in lossless12")
		sb, err := os.Stat(filepath.Join(bf, trunk.BinName))
		require.NoError(t, err)
		sl, err := os.Stat(filepath.Join(l12, trunk.BinName))
		require.NoError(t, err)
		t.Logf("%d matrices in lossless12, %d kept in bf16; trunk.bin %d bytes against %d (%.4f×)",
			encoded, kept, sl.Size(), sb.Size(), float64(sl.Size())/float64(sb.Size()))
		assert.Less(t, sl.Size(), sb.Size())
		fb := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(bf))
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(l12, trunk.SourcePacked))
		assert.Less(t, fl.Total, fb.Total, "the planner counts the encoded bytes")
		all := fl.Total + fl.EmbedBytes
		cases := []struct {
			name string
			opts []k3.Option
		}{
			{"floor", []k3.Option{k3.WithTrunkSlot(smallSlot)}}, // the budget: the source's floor
			{"mixed", []k3.Option{k3.WithTrunkBudget(all / 2)}},
			{"all-pinned", nil}, // a packed trunk without a budget is pinned whole
		}
		for _, c := range cases {
			for _, threads := range []int{1, 2} {
				for _, src := range []trunk.Source{trunk.SourcePacked, trunk.SourceShards} {
					t.Run(fmt.Sprintf("%s/t%d/%s", c.name, threads, src), func(t *testing.T) {
						opts := append([]k3.Option{k3.WithThreads(threads), k3.WithPackedTrunk(l12, src)}, c.opts...)
						if c.name == "floor" {
							opts = append(opts, k3.WithTrunkBudget(map[trunk.Source]int64{trunk.SourcePacked: fl.Floor, trunk.SourceShards: fb.Floor}[src]))
						}
						m := openModel(t, dir, opts...)
						assert.Equal(t, src, m.Plan().PackedSource)
						p := m.Plan().Trunk
						switch c.name {
						case "floor":
							assert.Empty(t, p.Pinned)
						case "mixed":
							assert.NotEmpty(t, p.Pinned)
							assert.Less(t, len(p.Pinned), p.Layers)
						default:
							assert.Len(t, p.Pinned, p.Layers)
						}
						assert.Equal(t, want, runModel(t, m, ref), "tokens and logits must equal the bf16 trunk's")
						st := m.Stats().Trunk
						require.NotNil(t, st)
						if src == trunk.SourcePacked {
							assert.Equal(t, m.Config().NumLayers+2, st.Verified, "every packed layer, the embedding and the head verified on first load")
						} else {
							assert.Zero(t, st.Verified, "the pack is not read")
						}
					})
				}
			}
		}
	})
}

// verifyPacked runs (*trunk.Packed).Verify on the packed trunk p of dir.
func verifyPacked(t *testing.T, dir, p string) error {
	t.Helper()
	pk, err := trunk.OpenPacked(p, mustLayers(t, dir), trunk.Expect{}, nil)
	require.NoError(t, err)
	defer pk.Close()
	var last, total int64
	err = pk.Verify(func(d, n int64) { last, total = d, n })
	assert.Equal(t, total, last, "progress reaches the total")
	return err
}

// firstLossless12 returns the first lossless12 tensor of layer 1 and its run.
func firstLossless12(t *testing.T, l *trunk.Layout) (trunk.LayerRun, trunk.RunTensor) {
	t.Helper()
	r := l.Layers[1]
	for _, rt := range r.Tensors {
		if rt.Format == trunk.FormatLossless12 {
			return r, rt
		}
	}
	t.Fatal("layer 1 has no lossless12 tensor")
	return r, trunk.RunTensor{}
}

// patchBin overwrites bytes of trunk.bin at off and, with reseal, rewrites the run's sha256 in
// trunk.json so that only the format's own checks stand between the bytes and the kernels.
func patchBin(t *testing.T, p string, r trunk.LayerRun, off int64, b []byte, reseal bool) {
	t.Helper()
	bin := filepath.Join(p, trunk.BinName)
	f, err := os.OpenFile(bin, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	run := make([]byte, r.Unpadded)
	_, err = f.ReadAt(run, r.FileOff)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	if !reseal {
		return
	}
	sum := sha256.Sum256(run)
	editLayout(t, p, hex.EncodeToString(r.SHA256), hex.EncodeToString(sum[:]))
}

func editLayout(t *testing.T, p, from, to string) {
	t.Helper()
	path := filepath.Join(p, trunk.LayoutName)
	js, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(js, []byte(from)), "%s once in trunk.json", from)
	require.NoError(t, os.WriteFile(path, bytes.Replace(js, []byte(from), []byte(to), 1), 0o644))
}

// TestLossless12PackedTrunkFaults: a flipped bit in a lossless12 layer fails its checksum; a
// malformed block (its checksum made to match) is refused by name, never decoded; a header or
// a trunk.json format field that disagrees with the bytes refuses the open.
func TestLossless12PackedTrunkFaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	t.Run("flipped-bit", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		require.NoError(t, verifyPacked(t, dir, p), "a sound pack verifies")
		testkit.FlipBits(t, filepath.Join(p, trunk.BinName), r.FileOff+rt.Off+rt.NBytes/2, 0x04)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p, trunk.SourcePacked))
		require.ErrorIs(t, err, trunk.ErrChecksum)
		assert.Contains(t, err.Error(), "layer 1")
		err = verifyPacked(t, dir, p)
		require.ErrorIs(t, err, trunk.ErrChecksum)
		assert.Contains(t, err.Error(), "layer 1 ")
		le, ok := errors.AsType[*trunk.LayerError](err)
		require.True(t, ok, "Verify's problems are *trunk.LayerError")
		assert.Equal(t, 1, le.Layer)
	})
	for _, pinned := range []bool{true, false} {
		t.Run(fmt.Sprintf("malformed-block/pinned=%v", pinned), func(t *testing.T) {
			p, l := packLossless12(t, dir)
			r, rt := firstLossless12(t, l)
			// Row 0's first window base, above the largest a window may have (241).
			patchBin(t, p, r, r.FileOff+rt.Off+lossless12.HeaderSize, []byte{242}, true)
			verr := verifyPacked(t, dir, p)
			require.ErrorIs(t, verr, lossless12.ErrMalformed)
			assert.NotErrorIs(t, verr, trunk.ErrChecksum)
			assert.Contains(t, verr.Error(), rt.Name)
			le, ok := errors.AsType[*trunk.LayerError](verr)
			require.True(t, ok, "Verify's problems are *trunk.LayerError")
			assert.Equal(t, r.Layer, le.Layer)
			opts := []k3.Option{k3.WithPackedTrunk(p, trunk.SourcePacked)}
			if !pinned {
				opts = append(opts, k3.WithTrunkBudget(floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked)).Floor),
					k3.WithTrunkSlot(smallSlot))
			}
			m, err := k3.Open(dir, opts...)
			if err == nil {
				defer m.Close()
				_, err = m.Forward(t.Context(), ref.FullIDs)
			}
			require.ErrorIs(t, err, lossless12.ErrMalformed)
			assert.Contains(t, err.Error(), rt.Name)
		})
	}
	t.Run("header-disagrees", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		var cols [4]byte
		binary.LittleEndian.PutUint32(cols[:], uint32(rt.Shape[0]))
		var rows [4]byte
		binary.LittleEndian.PutUint32(rows[:], uint32(rt.Shape[1]))
		// Rows and cols swapped: a well-formed header of another shape.
		patchBin(t, p, r, r.FileOff+rt.Off+4, append(rows[:], cols[:]...), true)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p))
		require.ErrorIs(t, err, trunk.ErrLayout)
		assert.Contains(t, err.Error(), rt.Name)
		assert.Contains(t, err.Error(), "header")
	})
	t.Run("bad-magic", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		patchBin(t, p, r, r.FileOff+rt.Off, []byte("LL13"), true)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p))
		require.ErrorIs(t, err, trunk.ErrLayout)
		require.ErrorIs(t, err, lossless12.ErrMalformed)
		assert.Contains(t, err.Error(), rt.Name)
	})
	t.Run("format-field", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		_, rt := firstLossless12(t, l)
		esc := fmt.Sprintf(`"format":"lossless12","escapes":%d`, rt.Escapes)
		for _, c := range []struct{ to, msg string }{
			{`"format":"bf16"`, "format bf16 on a U8 tensor"},
			{`"format":"lossless13","escapes":0`, `"lossless13"`},
			{fmt.Sprintf(`"format":"lossless12","escapes":%d`, rt.Escapes+1), "escape bytes a row needs"},
			{`"format":"lossless12"`, "without escapes"},
		} {
			q := t.TempDir()
			for _, n := range []string{trunk.BinName, trunk.LayoutName} {
				b, err := os.ReadFile(filepath.Join(p, n))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(q, n), b, 0o644))
			}
			js, err := os.ReadFile(filepath.Join(q, trunk.LayoutName))
			require.NoError(t, err)
			i := bytes.Index(js, []byte(`"`+rt.Name+`"`))
			require.Positive(t, i)
			j := i + bytes.Index(js[i:], []byte(esc))
			require.Greater(t, j, i)
			js = append(js[:j:j], append([]byte(c.to), js[j+len(esc):]...)...)
			require.NoError(t, os.WriteFile(filepath.Join(q, trunk.LayoutName), js, 0o644))
			_, err = k3.Open(dir, k3.WithPackedTrunk(q))
			require.ErrorIs(t, err, trunk.ErrLayout, c.to)
			assert.Contains(t, err.Error(), c.msg, c.to)
		}
	})
}
