//go:build realscale

package k3_test

// The real-scale check of the K3 geometry (about 30 minutes and 4 GB of disk on a 2-core box):
//
//	K3_ROUTED_DIR=/path/to/dir go test -tags realscale -run TestRealScale -v -timeout 3h .
//
// It writes the k3-routed checkpoint into K3_ROUTED_DIR when the directory holds none, times
// indexing and binding, decodes 2 tokens incrementally at the memory floor (trunk floor, expert
// cache 0) and at a large budget (trunk 12 GB, cache 4 GB), each in its own CLI process, and
// prints peak RSS, s/token and bytes read per token per component, with a verdict that both runs
// emitted the same ids. A third run prefills 16 distinct tokens with an expert trace to count the
// distinct experts routed.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
)

type cliReport struct {
	GeneratedIDs []int    `json:"generated_ids"`
	PeakRSS      int64    `json:"peak_rss_bytes"`
	SPT          *float64 `json:"seconds_per_token"`
	Wall         float64  `json:"wall_seconds"`
	Trunk        int64    `json:"trunk_bytes_read"`
	Embed        int64    `json:"embedding_bytes_read"`
	Head         int64    `json:"lm_head_bytes_read"`
	Experts      int64    `json:"expert_bytes_read"`
	LayersDone   int      `json:"layers_completed"`
	Plan         k3.Plan  `json:"plan"`
}

func TestRealScale(t *testing.T) {
	dir := os.Getenv("K3_ROUTED_DIR")
	if dir == "" {
		t.Skip("set K3_ROUTED_DIR")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t0 := time.Now()
		require.NoError(t, checkpoint.Synthesize(dir, "k3-routed", 1))
		t.Logf("wrote k3-routed in %.1f s", time.Since(t0).Seconds())
	}
	t.Logf("on disk: %s", du(t, dir))
	t0 := time.Now()
	plan, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<50))
	require.NoError(t, err)
	t.Logf("index + header bind (PlanFor): %.2f s; trunk floor %d bytes", time.Since(t0).Seconds(), plan.Trunk.Floor)
	t0 = time.Now()
	m, err := k3.Open(dir, k3.WithTrunkBudget(plan.Trunk.Floor), k3.WithCacheBudget(0))
	require.NoError(t, err)
	t.Logf("index + bind + allocate at the floor (Open): %.2f s", time.Since(t0).Seconds())
	m.Close()

	bin := filepath.Join(t.TempDir(), "k3")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("examples", "k3") // a module of its own
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ids := "1008,10484,318,15383,387"
	runs := []struct {
		name string
		args []string
	}{
		{"floor", []string{"--preset", "floor"}}, // trunk floor, expert cache 0
		{"large", []string{"--trunk-gb", "12", "--cache-gb", "4"}},
	}
	reps := make([]cliReport, len(runs))
	for i, r := range runs {
		js := filepath.Join(t.TempDir(), r.name+".json")
		args := append([]string{"run", dir, "--ids", ids, "--gen", "2", "--no-stop", "--out", js}, r.args...)
		t.Logf("%s: k3 %v", r.name, args)
		o, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "%s", o)
		b, err := os.ReadFile(js)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &reps[i]))
	}
	fmt.Printf("\n%-6s %12s %10s %9s %12s %12s %12s %12s  %s\n", "run", "peak RSS", "plan", "s/token", "trunk/tok", "experts/tok", "embed/tok", "head/tok", "ids")
	for i, r := range reps {
		n := int64(len(r.GeneratedIDs) + 1) // the prefill and each generated token read the weights once
		total := r.Plan.Trunk.Total + r.Plan.Cache.Total + r.Plan.KDAStateBytes
		fmt.Printf("%-6s %12d %10d %9.2f %12d %12d %12d %12d  %v (layers %d)\n", runs[i].name, r.PeakRSS, total, *r.SPT,
			r.Trunk/n, r.Experts/n, r.Embed/n, r.Head/n, r.GeneratedIDs, r.LayersDone)
	}
	same := slices.Equal(reps[0].GeneratedIDs, reps[1].GeneratedIDs)
	fmt.Printf("VERDICT: floor and large-budget ids identical: %v; floor peak RSS %.3f GB (target ≤ 1.5 GB)\n", same, float64(reps[0].PeakRSS)/1e9)
	require.True(t, same)
	require.LessOrEqual(t, reps[0].PeakRSS, int64(1.5e9))

	// Routing: 16 distinct prompt tokens through a large budget, with the expert trace.
	td := t.TempDir()
	var prompt []string
	for i := range 16 {
		prompt = append(prompt, strconv.Itoa(1000+997*i))
	}
	js := filepath.Join(td, "route.json")
	o, err := exec.Command(bin, "run", dir, "--ids", strings.Join(prompt, ","), "--gen", "1", "--no-stop", "--trunk-gb", "12", "--cache-gb", "4",
		"--dump-cache-trace", td, "--out", js).CombinedOutput()
	require.NoError(t, err, "%s", o)
	tr, err := os.ReadFile(filepath.Join(td, "expert_trace.bin"))
	require.NoError(t, err)
	type key struct{ l, e int32 }
	seen := map[key]bool{}
	perLayer := map[int32]map[int32]bool{}
	for i := 0; i+8 <= len(tr); i += 8 {
		k := key{int32(binary.LittleEndian.Uint32(tr[i:])), int32(binary.LittleEndian.Uint32(tr[i+4:]))}
		seen[k] = true
		if perLayer[k.l] == nil {
			perLayer[k.l] = map[int32]bool{}
		}
		perLayer[k.l][k.e] = true
	}
	cfg := m.Config()
	moe := cfg.NumLayers - cfg.FirstDense
	// --gen 1 takes its token from the prefill's logits: the trace is the 16 positions' union.
	fmt.Printf("ROUTING: per token %d experts (%d MoE layers × top-%d, distinct within a layer); the 16-token prompt touched %d distinct (layer, expert) pairs of at most %d (%.1f%%)\n",
		moe*cfg.TopK, moe, cfg.TopK, len(seen), 16*moe*cfg.TopK, 100*float64(len(seen))/float64(16*moe*cfg.TopK))
}

func du(t *testing.T, dir string) string {
	o, err := exec.Command("du", "-sh", dir).Output()
	if err != nil {
		return err.Error()
	}
	return string(o)
}
