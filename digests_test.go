package k3_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// digestOutEnv names the file TestDigestHelper writes its digest lines to. The helper does
// nothing without it, so a plain `go test ./...` only runs it as TestPureGoBuildDigests' child.
const digestOutEnv = "K3_DIGEST_OUT"

// buildHeader is the first line of the helper's output; it names the build the lines came
// from, so the parent can prove the child really ran the other kernel set.
func buildHeader(purego bool) string {
	return fmt.Sprintf("# build purego=%t", purego)
}

// modelDigest is one model's digests: of the teacher-forced logits over full_ids and of the
// logits each greedy pick after prompt_ids was made from (SPEC §5.4, §5.6).
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
// crossed with 1 and 2 worker goroutines (SPEC §5.6, E1). GOMAXPROCS=1 serialises the workers,
// so a reduction that depended on goroutine timing would show up here.
func TestDigestsProcsThreads(t *testing.T) {
	want := modelDigests(t, k3.WithThreads(1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for _, threads := range []int{1, 2} {
			got := modelDigests(t, k3.WithThreads(threads))
			for i := range want {
				assert.Equal(t, want[i], got[i], "GOMAXPROCS=%d threads=%d, against threads=1", procs, threads)
			}
		}
	}
	if !t.Failed() {
		for _, d := range want {
			t.Logf("DIGEST %v (GOMAXPROCS 1,2 × threads 1,2 agree)", d)
		}
	}
}

// TestPureGoBuildDigests: the logits of every model are bit-identical between the assembly
// kernels (default build) and their pure-Go twins (-tags purego) (SPEC §5.6, E1). The other
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
