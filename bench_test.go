package k3_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

// tokenBytes is the weight bytes one decode step must read: the whole trunk, lm_head, and TopK
// routed experts per MoE layer (the embedding contributes one row).
func tokenBytes(m *k3.Model) int {
	c, in := m.Config(), m.Info()
	moeLayers := c.NumLayers - c.FirstDense
	perExpert := in.Experts.Bytes / int64(moeLayers*c.NumExperts)
	lmHead := int64(c.Vocab * c.Hidden * 2)
	return int(in.Trunk.Bytes + lmHead + int64(moeLayers*c.TopK)*perExpert)
}

// decodeReady opens dir, prefills prompt and returns the model (the caller closes it), the
// session, the greedy next id and the post-prompt snapshot every timed step restores.
func decodeReady(b *testing.B, dir string, threads int, prompt []int) (*k3.Model, *k3.Session, int, *k3.Snapshot) {
	b.Helper()
	m, err := k3.Open(dir, k3.WithThreads(threads))
	if err != nil {
		b.Fatal(err)
	}
	s := m.NewSession()
	if err := s.Prefill(context.Background(), prompt); err != nil {
		m.Close()
		b.Fatal(err)
	}
	next, err := s.Next()
	if err != nil {
		m.Close()
		b.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		m.Close()
		b.Fatal(err)
	}
	return m, s, next, snap
}

// benchDecode measures one incremental step after the prompt (restoring the post-prompt snapshot
// before each step, so every iteration decodes at the same context length), paired with a plain
// read of as many bytes as the step's weights ("x-read" = decode bandwidth / read bandwidth).
func benchDecode(b *testing.B, dir string, prompt []int, threads int) {
	m, s, next, snap := decodeReady(b, dir, threads, prompt)
	defer m.Close()
	ctx := context.Background()
	buf := testkit.Filled(tokenBytes(m))
	testkit.Paired(b, buf, threads, func() {
		if err := s.Restore(snap); err != nil {
			b.Fatal(err)
		}
		if err := s.Step(ctx, next); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/token")
}

// BenchmarkDecodeWide: incremental decode on models/wide after its 9-id prompt.
func BenchmarkDecodeWide(b *testing.B) {
	dir := filepath.Join(testkit.Path(b, "models"), "wide")
	ref := testkit.LoadReference(b, dir)
	for _, th := range []int{1, 2} {
		b.Run("threads="+strconv.Itoa(th), func(b *testing.B) { benchDecode(b, dir, ref.PromptIDs, th) })
	}
}

// BenchmarkDecodePerf: incremental decode on the synthetic perf geometry (hidden 2048, 64 experts
// top-8, vocab 32768) after a 16-id prompt. Synthesizing it takes a while and about 1.5 GB of disk;
// set K3_PERF_DIR to a directory to keep it between runs.
func BenchmarkDecodePerf(b *testing.B) {
	perf := testkit.Perf(checkpoint.Synthesize)
	perf.TempDir = true
	dir := perf.Dir(b)
	prompt := []int{1, 100, 2000, 30000, 5, 77, 123, 4567, 8, 9, 10, 11, 12, 13, 14, 15}
	for _, th := range []int{1, 2} {
		b.Run("threads="+strconv.Itoa(th), func(b *testing.B) { benchDecode(b, dir, prompt, th) })
	}
}

// BenchmarkPrefillPerf: the FLOOR command's 256-token prefill on the perf geometry at 2 threads,
// one prefill per op on an open model, for a CPU profile of it:
// K3_PERF_DIR=<dir> go test -run '^$' -bench PrefillPerf -benchtime 4x -cpuprofile prefill.out .
func BenchmarkPrefillPerf(b *testing.B) {
	dir := testkit.PerfDir(b, checkpoint.Synthesize)
	m, err := k3.Open(dir, k3.WithThreads(2))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ids := make([]int, floorPrefillLen)
	for i := range ids {
		ids[i] = (i*7919 + 3) % m.Config().Vocab
	}
	ctx := context.Background()
	for b.Loop() {
		if err := m.NewSession().Prefill(ctx, ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/prefill")
}

// BenchmarkForwardWide: one teacher-forced pass over models/wide's 29 reference ids (prefill
// throughput; every weight is read once per pass through the batched mat-muls).
func BenchmarkForwardWide(b *testing.B) {
	dir := filepath.Join(testkit.Path(b, "models"), "wide")
	ref := testkit.LoadReference(b, dir)
	m, err := k3.Open(dir, k3.WithThreads(1))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := m.Forward(ctx, ref.FullIDs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ref.FullIDs))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
