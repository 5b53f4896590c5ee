package k3_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/floats"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// truth is a model fixture's reference_f64.json: the teacher-forced logits computed entirely in
// float64, and the float32 reference's own distance from them (§5.7).
type truth struct {
	T         int         `json:"T"`
	V         int         `json:"V"`
	Ref32Max  float64     `json:"ref32_max_abs_err"`
	Ref32RMS  float64     `json:"ref32_rms_err"`
	LogitsF64 [][]float64 `json:"logits_f64"`
}

func loadTruth(t testing.TB, dir string) *truth {
	t.Helper()
	r := testkit.ReadJSON[truth](t, filepath.Join(dir, "reference_f64.json"))
	require.Len(t, r.LogitsF64, r.T, "%s: logits_f64 rows", dir)
	require.Positive(t, r.Ref32Max, "%s: ref32_max_abs_err", dir)
	require.Positive(t, r.Ref32RMS, "%s: ref32_rms_err", dir)
	return &r
}

// distance returns max |a − b| and RMS(a − b) over all rows (float32 engine logits against the
// float64 truth).
func distance(got [][]float32, want [][]float64) (maxAbs, rms float64) {
	var n int
	var sum float64
	row := []float64(nil)
	for p, g := range got {
		row = row[:0]
		for _, v := range g {
			row = append(row, float64(v))
		}
		floats.Sub(row, want[p])
		if d := floats.Norm(row, math.Inf(1)); !(d <= maxAbs) { // also catches NaN
			maxAbs = d
		}
		sum += floats.Dot(row, row)
		n += len(row)
	}
	return maxAbs, math.Sqrt(sum / float64(n))
}

// TestGateTeacherForcing is GATE 1 (§5.7, E2): one forward over full_ids; the argmax at every
// position equals tf_pred, and the logits are at least twice as close to the float64 truth as the
// float32 reference is (max and RMS distance each ≤ half the reference's). The distance from the
// float32 reference's own logits is reported as information.
func TestGateTeacherForcing(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		require.Equal(t, ref.Vocab, m.Config().Vocab, "vocab")
		logits, err := m.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err)
		var maxDiff float64
		agree := 0
		for p, row := range logits {
			got, err := sample.Argmax(row)
			require.NoError(t, err, "position %d", p)
			if assert.Equal(t, ref.TFPred[p], got, "position %d: argmax, oracle", p) {
				agree++
			}
			for v, bits := range ref.LogitsBits[p] {
				d := math.Abs(float64(row[v]) - float64(math.Float32frombits(bits)))
				if !(d <= maxDiff) { // also catches NaN
					maxDiff = d
				}
			}
		}
		tr := loadTruth(t, dir)
		require.Equal(t, len(logits), tr.T, "reference_f64 positions")
		require.Equal(t, ref.Vocab, tr.V, "reference_f64 vocab")
		maxAbs, rms := distance(logits, tr.LogitsF64)
		t.Logf("GATE1 %s: argmax %d/%d; vs float64 truth: max %.3g (%.2f of the f32 reference's %.3g), RMS %.3g (%.2f of %.3g); max |Δ| vs logits_bits %.3g; digest %016x",
			filepath.Base(dir), agree, len(logits), maxAbs, maxAbs/tr.Ref32Max, tr.Ref32Max,
			rms, rms/tr.Ref32RMS, tr.Ref32RMS, maxDiff, testkit.Digest(logits...))
		// Written as "≤ holds" so that NaN fails.
		assert.True(t, maxAbs <= 0.5*tr.Ref32Max, "max |engine − truth| = %g > 0.5 × %g", maxAbs, tr.Ref32Max)
		assert.True(t, rms <= 0.5*tr.Ref32RMS, "RMS(engine − truth) = %g > 0.5 × %g", rms, tr.Ref32RMS)
	})
}

// greedy runs Model.Generate and returns the ids and the logits each pick was made from.
func greedy(t testing.TB, m *k3.Model, prompt []int, n int, full bool) ([]int, [][]float32) {
	t.Helper()
	var steps [][]float32
	var ids []int
	o := k3.GenerateOptions{MaxTokens: n, FullRecompute: full,
		OnLogits: func(step int, l []float32) {
			assert.Equal(t, len(steps), step, "OnLogits step")
			steps = append(steps, append([]float32(nil), l...))
		}}
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids, steps
}

// TestGateGreedy is GATE 2 (full recompute reproduces full_ids) and GATE 3 (incremental
// reproduces full_ids with logits bit-identical to GATE 2's).
func TestGateGreedy(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		n := len(ref.FullIDs) - len(ref.PromptIDs)
		want := ref.FullIDs[len(ref.PromptIDs):]
		fullIDs, fullLogits := greedy(t, m, ref.PromptIDs, n, true)
		incIDs, incLogits := greedy(t, m, ref.PromptIDs, n, false)
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(fullIDs), "GATE2 full recompute")
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(incIDs), "GATE3 incremental")
		require.Len(t, incLogits, len(fullLogits), "logit steps")
		for i := range fullLogits {
			assert.True(t, testkit.SameBits(fullLogits[i], incLogits[i]), "GATE3 step %d: incremental logits differ from full recompute", i)
		}
		t.Logf("GATE2/3 %s: %d/%d tokens (full recompute), %d/%d (incremental), logits bit-identical; digest %016x",
			filepath.Base(dir), countEq(fullIDs, want), n, countEq(incIDs, want), n, testkit.Digest(incLogits...))
	})
}

func countEq(a, b []int) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}

// digestOutEnv names the file TestDigestHelper writes its digest lines to. The helper does
// nothing without it, so a plain `go test ./...` only runs it as TestPureGoBuildDigests' child.
const digestOutEnv = "K3_DIGEST_OUT"

// buildHeader is the first line of the helper's output; it names the build the lines came
// from, so the parent can prove the child really ran the other kernel set.
func buildHeader(purego bool) string {
	return fmt.Sprintf("# build purego=%t", purego)
}

// modelDigest is one model's digests: of the teacher-forced logits over full_ids and of the
// logits each greedy pick after prompt_ids was made from (§5.4, §5.6).
type modelDigest struct {
	name       string
	tf, greedy uint64
}

func (d modelDigest) String() string {
	return fmt.Sprintf("%s %016x %016x", d.name, d.tf, d.greedy)
}

// modelDigests computes the digests of every fixture model, in testkit.Models order.
func modelDigests(t testing.TB, opts ...k3.Option) []modelDigest {
	t.Helper()
	var out []modelDigest
	for _, dir := range testkit.Models(t) {
		ref := testkit.LoadReference(t, dir)
		m := openModel(t, dir, opts...)
		rows, err := m.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err, "%s: forward", dir)
		_, steps := greedy(t, m, ref.PromptIDs, len(ref.FullIDs)-len(ref.PromptIDs), false)
		require.NotEmpty(t, steps, "%s: greedy generation produced no logits", dir)
		out = append(out, modelDigest{name: filepath.Base(dir), tf: testkit.Digest(rows...), greedy: testkit.Digest(steps...)})
		m.Close()
	}
	return out
}

// TestDigestHelper is the child half of TestPureGoBuildDigests: with K3_DIGEST_OUT set it writes
// the build header and one `<model> <tf-digest> <greedy-digest>` line per fixture model.
func TestDigestHelper(t *testing.T) {
	out := os.Getenv(digestOutEnv)
	if out == "" {
		t.Skipf("subprocess helper of TestPureGoBuildDigests; runs only with %s set", digestOutEnv)
	}
	lines := []string{buildHeader(puregoBuild)}
	for _, d := range modelDigests(t) {
		lines = append(lines, d.String())
	}
	require.NoError(t, os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// TestDigestsProcsThreads: the logits of every model are bit-identical under GOMAXPROCS 1 and 2
// crossed with 1, 2 and 3 worker goroutines (§5.6, E1). GOMAXPROCS=1 serialises the
// workers, so a reduction that depended on goroutine timing would show up here.
func TestDigestsProcsThreads(t *testing.T) {
	want := modelDigests(t, k3.WithThreads(1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for _, threads := range []int{1, 2, 3} {
			got := modelDigests(t, k3.WithThreads(threads))
			for i := range want {
				assert.Equal(t, want[i], got[i], "GOMAXPROCS=%d threads=%d, against threads=1", procs, threads)
			}
		}
	}
	if !t.Failed() {
		for _, d := range want {
			t.Logf("DIGEST %v (GOMAXPROCS 1,2 × threads 1,2,3 agree)", d)
		}
	}
}

// TestPureGoBuildDigests: the logits of every model are bit-identical between the assembly
// kernels (default build) and their pure-Go twins (-tags purego) (§5.6, E1). The other
// build cannot be linked into this binary, so a `go test` child compiled with the opposite tag
// runs TestDigestHelper and the lines are compared here.
func TestPureGoBuildDigests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the second-build subprocess")
	}
	want := modelDigests(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		if testkit.InCI() {
			require.Failf(t, "go tool not found", "%v; CI=true needs it to build -tags purego", err)
		}
		t.Skipf("go tool not found (%v); cannot build the other kernel set", err)
	}

	tags := "-tags=purego"
	if puregoBuild {
		tags = "-tags=" // this binary is the pure-Go one, so the child checks the assembly
	}
	checkChild(t, goTool, tags, "", buildHeader(!puregoBuild), want)
	if !puregoBuild && cpu.X86.HasAVX512F {
		// On an AVX-512 machine the default build runs the AVX-512 kernels; pin the AVX2 ones
		// too (x/sys/cpu honours GODEBUG, and so does every kernel's dispatch).
		checkChild(t, goTool, "-tags=", "GODEBUG=cpu.avx512f=off", buildHeader(false), want)
	}
	t.Logf("CPU AVX2+FMA=%t AVX-512F=%t (without them the default build runs pure Go too)",
		cpu.X86.HasAVX2 && cpu.X86.HasFMA, cpu.X86.HasAVX512F)
	if !t.Failed() {
		for _, w := range want {
			t.Logf("DIGEST %v (default and purego builds agree)", w)
		}
	}
}

// checkChild runs TestDigestHelper in a child `go test` with tags and an extra environment
// variable and compares its digests with want.
func checkChild(t *testing.T, goTool, tags, env, wantHeader string, want []modelDigest) {
	t.Helper()
	// The child gets whatever time this test has left, minus a margin to report its failure.
	ctx := t.Context()
	timeout := 5 * time.Minute
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-10*time.Second)
	}
	require.Positive(t, timeout, "no time left for the child build before the test deadline")
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	outFile := filepath.Join(t.TempDir(), "digests.txt")
	cmd := exec.CommandContext(ctx, goTool, "test", tags, "-count=1",
		"-timeout="+timeout.String(), "-run=^TestDigestHelper$", ".")
	cmd.Env = append(os.Environ(), digestOutEnv+"="+outFile)
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s\n%s", env, strings.Join(cmd.Args, " "), out)
	t.Logf("child %s `go test %s` took %v", env, tags, time.Since(start).Round(time.Millisecond))

	header, lines := readDigestLines(t, outFile)
	require.Equal(t, wantHeader, header, "the child's build header: it did not build the other kernel set")
	assert.Len(t, lines, len(want), "the child's model lines, one per fixture model")
	for i, w := range want {
		if !assert.Less(t, i, len(lines), "model %s: no line from the child", w.name) {
			continue
		}
		assert.Equal(t, w.String(), lines[i], "digests differ between builds: the child (%s %s) against this test (purego=%t)",
			tags, env, puregoBuild)
	}
}

// readDigestLines returns the helper's header line and its model lines.
func readDigestLines(t *testing.T, path string) (header string, lines []string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "child wrote no digests")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "#"):
			header = line
		case line != "":
			lines = append(lines, line)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, lines, "child wrote no model lines to %s", path)
	return header, lines
}
