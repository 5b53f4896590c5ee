package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
