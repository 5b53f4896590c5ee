package checkpoint

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/safetensors"
)

func writeGeometry(t *testing.T, name string, seed int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := writeSynth(dir, mustLookup(t, name), seed, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// TestSynthDeterministic: the same seed gives identical bytes; another seed changes every shard.
func TestSynthDeterministic(t *testing.T) {
	a := readDir(t, writeGeometry(t, "tiny", 7))
	b := readDir(t, writeGeometry(t, "tiny", 7))
	c := readDir(t, writeGeometry(t, "tiny", 8))
	if len(a) != 5 { // config, index, 3 shards
		t.Errorf("wrote %d files, want 5", len(a))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
		if strings.HasSuffix(name, ".safetensors") && bytes.Equal(data, c[name]) {
			t.Errorf("%s is identical for seeds 7 and 8", name)
		}
	}
}

// TestSynthTinyLayout: the tiny geometry reads back through the config and safetensors packages
// with the fixture's tensor set, dtypes and shapes.
func TestSynthTinyLayout(t *testing.T) {
	dir := writeGeometry(t, "tiny", 1)
	g := mustLookup(t, "tiny")
	got, err := config.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprintf("%+v", *got), fmt.Sprintf("%+v", g.Config); a != b {
		t.Errorf("config round trip:\n got %s\nwant %s", a, b)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if !ck.HasIndex() || len(ck.Shards()) != 3 {
		t.Errorf("index %v, %d shards", ck.HasIndex(), len(ck.Shards()))
	}
	units, err := synthPlan(&g.Config, false)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, u := range units {
		for i := range u {
			want++
			tt, ok := ck.Tensor(u[i].name)
			if !ok {
				t.Errorf("%s missing", u[i].name)
				continue
			}
			if tt.DType != u[i].dtype || !slices.Equal(tt.Shape, u[i].shape) {
				t.Errorf("%s: %v %v, want %v %v", tt.Name, tt.DType, tt.Shape, u[i].dtype, u[i].shape)
			}
		}
	}
	// The models/tiny fixture holds 916 tensors in the same layout.
	if ck.Len() != want || want != 916 {
		t.Errorf("%d tensors, plan %d, fixture layout 916", ck.Len(), want)
	}
	// Each expert's six tensors are adjacent, in the released order, in one shard.
	ts := ck.Tensors()
	for i, tt := range ts {
		if strings.HasSuffix(tt.Name, "experts.0.w1.weight_packed") {
			p := strings.TrimSuffix(tt.Name, "w1.weight_packed")
			for j, s := range []string{"w1.weight_packed", "w1.weight_scale", "w2.weight_packed", "w2.weight_scale", "w3.weight_packed", "w3.weight_scale"} {
				if ts[i+j].Name != p+s || ts[i+j].File != tt.File {
					t.Fatalf("expert tensors not adjacent: %s at %d", ts[i+j].Name, j)
				}
			}
		}
	}
}

// dotRow returns W[r]·x in float64 for a row-major f32 matrix.
func dotRow(w []float32, r, cols int, x []float64) float64 {
	var s float64
	for i := range cols {
		s += float64(w[r*cols+i]) * x[i]
	}
	return s
}

// unitInputs returns n pseudo-random vectors of width e with RMS 1, as the RMSNorm'd inputs of the
// projections are.
func unitInputs(n, e int) [][]float64 {
	rng := newNormals(99, "inputs")
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = make([]float64, e)
		var ss float64
		for j := range xs[i] {
			xs[i][j] = rng.next()
			ss += xs[i][j] * xs[i][j]
		}
		for j := range xs[i] {
			xs[i][j] /= math.Sqrt(ss / float64(e))
		}
	}
	return xs
}

func topK(v []float64, k int) []int {
	v = slices.Clone(v)
	var out []int
	for range k {
		best := -1
		for i, x := range v {
			if best < 0 || x > v[best] {
				best = i
			}
		}
		out = append(out, best)
		v[best] = math.Inf(-1)
	}
	slices.Sort(out)
	return out
}

// TestSynthScalesMatter checks, with an independent float64 evaluation, that the synthetic weights
// exercise what the fixtures exercise: the router bias changes selections, and the SiTU-GLU
// gate and up inputs reach the tanh caps (β1 = 4, β2 = 25) on a visible share of entries.
func TestSynthScalesMatter(t *testing.T) {
	dir := writeGeometry(t, "tiny", 3)
	g := mustLookup(t, "tiny")
	c := &g.Config
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	read := func(name string) []float32 { return testkit.ReadNamed(t, ck, name, ck.ReadF32) }
	xs := unitInputs(200, c.Hidden)
	changed, rows := 0, 0
	for l := c.FirstDense; l < c.NumLayers; l++ {
		lp := layout.LayerPrefix(l) + "block_sparse_moe."
		gate, bias := read(lp+"gate.weight"), read(lp+"gate.e_score_correction_bias")
		for _, x := range xs {
			score := make([]float64, c.NumExperts)
			choice := make([]float64, c.NumExperts)
			for e := range score {
				score[e] = 1 / (1 + math.Exp(-dotRow(gate, e, c.Hidden, x)))
				choice[e] = score[e] + float64(bias[e])
			}
			rows++
			if !slices.Equal(topK(score, c.TopK), topK(choice, c.TopK)) {
				changed++
			}
		}
	}
	t.Logf("router bias changed the selected set on %d of %d rows", changed, rows)
	if changed*10 < rows || changed == rows {
		t.Errorf("router bias changed %d of %d selections; want a visible share, not all", changed, rows)
	}

	share := func(w []float32, rows, cols int, xs [][]float64, cap float64) float64 {
		n, over := 0, 0
		for _, x := range xs {
			for r := range rows {
				n++
				if math.Abs(dotRow(w, r, cols, x)) > cap {
					over++
				}
			}
		}
		return float64(over) / float64(n)
	}
	dg := share(read(layout.LayerPrefix(0)+"mlp.gate_proj.weight"), c.DenseInter, c.Hidden, xs, c.SiTUBeta)
	du := share(read(layout.LayerPrefix(0)+"mlp.up_proj.weight"), c.DenseInter, c.Hidden, xs, c.SiTULinearBeta)
	lat := unitInputs(200, c.Latent)
	ep := layout.ExpertPrefix(1, 0)
	w1 := make([]float32, c.MoEInter*c.Latent)
	if err := mxfp4.Dequantize(w1, testkit.ReadNamed(t, ck, ep+"w1.weight_packed", ck.Read), testkit.ReadNamed(t, ck, ep+"w1.weight_scale", ck.Read), c.MoEInter, c.Latent); err != nil {
		t.Fatal(err)
	}
	eg := share(w1, c.MoEInter, c.Latent, lat, c.SiTUBeta)
	t.Logf("share beyond the cap: dense gate %.2f, dense up %.3f, expert w1 %.2f", dg, du, eg)
	if dg < 0.3 || eg < 0.3 || du < 0.01 {
		t.Errorf("caps rarely reached: dense gate %.2f, dense up %.3f, expert w1 %.2f", dg, du, eg)
	}
}

// TestSynthK3Sparse writes the full-size k3 geometry: 96 shards whose apparent size is the real
// checkpoint's text part while the disk holds little more than the headers.
func TestSynthK3Sparse(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 sparse shards (about 80 MB of headers)")
	}
	dir := writeGeometry(t, "k3", 1)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var apparent, shards int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".safetensors") {
			shards++
			apparent += fi.Size()
		}
	}
	used := diskUsage(t, dir)
	t.Logf("k3: %d shards, apparent %d bytes, on disk %d bytes", shards, apparent, used)
	if shards != 96 {
		t.Errorf("%d shards, want 96", shards)
	}
	if apparent < 1_560_000_000_000 || used > 1<<30 {
		t.Errorf("apparent %d bytes (want about 1.56e12), on disk %d", apparent, used)
	}
}

func TestSynthWriteProgress(t *testing.T) {
	g, _ := lookupGeometry("tiny")
	var calls int
	var last, total int64
	if err := writeSynth(t.TempDir(), g, 1, func(done, tot int64) {
		calls++
		if done <= last || done > tot {
			t.Fatalf("progress %d of %d after %d", done, tot, last)
		}
		last, total = done, tot
	}); err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last != total {
		t.Fatalf("%d calls, ended at %d of %d", calls, last, total)
	}
}
