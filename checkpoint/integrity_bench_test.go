package checkpoint_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

// BenchmarkOpenVerifyPerf measures what WithVerify costs on the synthetic
// "perf" checkpoint (about 1.6 GB) rewritten with colibri.sha256 digests:
// Open with and without verification in the same run, with the hashing
// throughput (MB/s) and verification's share of the verified open time.
// K3_PERF_SUMS names the directory to use; it is created on first use
// (checkpoint.Synthesize(dir, "perf", 1) plus digests). Page-cache warm: the
// figures are the hashing cost, not the disk's.
//
//	K3_PERF_SUMS=<dir> go test -run XX -bench OpenVerifyPerf -benchtime 3x .
func BenchmarkOpenVerifyPerf(b *testing.B) {
	dir := testkit.Checkpoint{
		Env: "K3_PERF_SUMS", Geometry: "perf", Seed: 1, Synthesize: checkpoint.Synthesize,
		After: func(tb testing.TB, dir string) { addChecksums(tb, dir, 4) },
	}.Dir(b)
	// The machine's bare SHA-256 speed, for the ratio.
	b.Run("sha256", func(b *testing.B) {
		buf := make([]byte, 64<<20)
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			sha256.Sum256(buf)
		}
	})
	for _, verify := range []bool{false, true} {
		name := "plain"
		var opts []k3.Option
		if verify {
			name, opts = "verify", []k3.Option{k3.WithVerify()}
		}
		b.Run(name, func(b *testing.B) {
			var rep checkpoint.Report
			var open, hashing float64
			var bytes int64
			for b.Loop() {
				start := time.Now()
				m, err := k3.Open(dir, opts...)
				if err != nil {
					b.Fatal(err)
				}
				open += time.Since(start).Seconds()
				rep = m.Integrity()
				hashing += rep.VerifySeconds
				bytes += rep.VerifiedBytes
				m.Close()
			}
			if verify {
				b.ReportMetric(float64(bytes)/hashing/1e6, "MB/s")
				b.ReportMetric(hashing/open, "verify-share")
				b.ReportMetric(float64(rep.VerifiedTensors), "tensors")
			}
		})
	}
}
