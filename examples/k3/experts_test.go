package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
)

func TestSelectExperts(t *testing.T) {
	sc, ok := selectExperts("language_model.model.layers.3.block_sparse_moe.experts.17.w2.weight_packed")
	require.True(t, ok)
	require.Equal(t, "language_model.model.layers.3.block_sparse_moe.experts.17.w2.weight_scale", sc)
	for _, n := range []string{
		"language_model.model.layers.3.block_sparse_moe.experts.17.w2.weight_scale",
		"language_model.model.layers.3.block_sparse_moe.shared_experts.w2.weight_packed",
		"language_model.model.layers.3.block_sparse_moe.experts.17.w4.weight_packed",
		"language_model.model.layers.3.block_sparse_moe.experts.x.w1.weight_packed",
	} {
		_, ok := selectExperts(n)
		require.False(t, ok, n)
	}
}

func TestCompressAndVerifyExperts(t *testing.T) {
	src := synthTiny(t)
	out := filepath.Join(t.TempDir(), "coded")
	code, stdout, stderr := runCLI(t, "compress-experts", src, out)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "expert tensors")
	require.Contains(t, stderr, "k3: coded ")
	require.Contains(t, stderr, "k3: verified ")

	code, stdout, stderr = runCLI(t, "verify-experts", out, "--workers", "1")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "all digests match")

	// Every coded tensor is stamped; the source's are not.
	ck, err := safetensors.Open(out)
	require.NoError(t, err)
	stamps, err := quant.LoadStamps(ck.Metadata())
	require.NoError(t, err)
	var victim *safetensors.Tensor
	coded := 0
	for _, tn := range ck.Tensors() {
		st, err := rans.Inspect(ck, stamps, tn)
		require.NoError(t, err)
		_, want := selectExperts(tn.Name)
		require.Equal(t, want, st.Coded, tn.Name)
		if st.Coded {
			coded++
			victim = tn
		}
	}
	require.NoError(t, ck.Close())
	require.Positive(t, coded)

	// A flipped byte in a coded record fails verify-experts with exit 1.
	f, err := os.OpenFile(victim.File, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 1)
	off := victim.Offset + victim.Size - 3
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	code, _, stderr = runCLI(t, "verify-experts", out)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, stderr, victim.Name)

	// The output directory now exists: without --force it is refused.
	code, _, stderr = runCLI(t, "compress-experts", src, out)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, stderr, "not empty")
}

func TestExpertsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"compress-experts", "a"},
		{"compress-experts", "a", "b", "c"},
		{"verify-experts"},
		{"verify-experts", "d", "--workers", "0"},
		{"verify-experts", "d", "--bogus"},
	} {
		code, _, stderr := runCLI(t, args...)
		require.Equal(t, exitUsage, code, strings.Join(args, " "))
		require.Contains(t, stderr, "--help for usage")
		require.Contains(t, stderr, "k3 "+args[0]+":", "the message names the subcommand")
	}
	code, stdout, _ := runCLI(t, "verify-experts", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "compress-experts")
	code, _, stderr := runCLI(t, "verify-experts", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, exitRuntime, code)
	require.Contains(t, stderr, rans.ManifestFileName)
}

// requireNotCoded checks that out is not accepted as a coded checkpoint after a failed or
// interrupted compress-experts: no manifest, verify-experts exits 1 naming it, run refuses the
// directory, and no temporary of the repack (spill files among them) is left.
func requireNotCoded(t *testing.T, out string) {
	t.Helper()
	assert.NoFileExists(t, filepath.Join(out, rans.ManifestFileName))
	r := execK3(t, "", "", "verify-experts", out)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, rans.ManifestFileName)
	r = execK3(t, "", "", "run", out, "--ids", "1", "--gen", "1")
	assert.NotEqual(t, exitOK, r.code, "run accepted a partial output: %s", r.stdout)
	for _, n := range testkit.DirNames(t, out) {
		assert.False(t, strings.HasPrefix(n, ".cfs1-spill-") || strings.HasPrefix(n, ".copy-") ||
			strings.HasPrefix(n, ".tmp-") || strings.HasSuffix(n, ".tmp"), "temporary %s left in the output", n)
	}
}

// TestExecCompressExpertsForceFullDisk: compress-experts --force over a finished output on a
// disk that fills part-way exits 1 and leaves nothing verify-experts or run accepts — the old
// manifest and shards are gone, not served — and a stale spill file of an earlier interrupted
// run is removed; the source directory is unchanged. A later --force with room succeeds.
func TestExecCompressExpertsForceFullDisk(t *testing.T) {
	src := filepath.Join(t.TempDir(), "m")
	require.NoError(t, checkpoint.Synthesize(src, "tiny", 3))
	before := testkit.DirNames(t, src)
	cwd := t.TempDir()
	out := filepath.Join(cwd, "coded")
	r := execK3(t, cwd, "", "compress-experts", src, out)
	require.Equal(t, exitOK, r.code, r.stderr)
	stale := filepath.Join(out, ".cfs1-spill-1234")
	require.NoError(t, os.WriteFile(stale, []byte("left by an interrupted run"), 0o600))

	r = execLimited(t, cwd, 8, "compress-experts", src, out, "--force")
	require.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "file too large")
	requireNotCoded(t, out)
	assert.Equal(t, before, testkit.DirNames(t, src), "nothing written in the source")

	r = execK3(t, cwd, "", "compress-experts", src, out, "--force")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = execK3(t, cwd, "", "verify-experts", out)
	require.Equal(t, exitOK, r.code, r.stderr)
}

// TestExecCompressExpertsInterrupted: SIGINT or SIGTERM while compress-experts codes the perf
// checkpoint's experts ends it (130, 143) within seconds, removes its spill file and leaves no
// manifest; the source directory is unchanged. It needs the perf checkpoint (K3_PERF_DIR),
// whose repack takes long enough to be caught mid-shard.
func TestExecCompressExpertsInterrupted(t *testing.T) {
	src := testkit.PerfDir(t, checkpoint.Synthesize)
	before := testkit.DirNames(t, src)
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "coded")
			cmd := exec.Command(k3Binary(t), "compress-experts", src, out, "--workers", "1")
			var buf syncBuffer
			signalWhen(t, cmd, &buf, 60*time.Second, func() bool {
				spills, _ := filepath.Glob(filepath.Join(out, ".cfs1-spill-*"))
				return len(spills) > 0 // a shard's experts are being coded
			}, c.sig, c.code, 20*time.Second)
			assert.Contains(t, buf.String(), "interrupted")
			requireNotCoded(t, out)
			assert.Equal(t, before, testkit.DirNames(t, src), "nothing written in the source")
		})
	}
}
