package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

// TestInfoTrunkStats: info --trunk-stats prints a line per matrix checkpoint.MeasureLossless12
// measures, in its order with its figures, and a total line with the library's sums, on every
// fixture model; a directory without a checkpoint fails with exit 1.
func TestInfoTrunkStats(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		stats, err := checkpoint.MeasureLossless12(dir)
		require.NoError(t, err)
		require.NotEmpty(t, stats)
		r := execK3(t, "", "", "info", dir, "--trunk-stats")
		require.Equal(t, exitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, len(stats)+2, r.stdout)
		assert.True(t, strings.HasPrefix(lines[0], "tensor "), lines[0])
		var bytes, bf16, escapes, weights int64
		var entropy float64
		for i, s := range stats {
			f := strings.Fields(lines[i+1])
			require.Len(t, f, 12, lines[i+1]) // the shape and both sizes are two fields each
			assert.Equal(t, []string{s.Name, fmt.Sprintf("[%d,", s.Rows), fmt.Sprintf("%d]", s.Cols),
				fmt.Sprintf("%.3f", s.BitsPerWeight()), fmt.Sprintf("%.4f", s.Ratio()), fmt.Sprint(s.Escapes)}, f[:6])
			assert.Equal(t, size(s.Bytes), strings.Join(f[10:], " "), s.Name)
			bytes += s.Bytes
			bf16 += s.BF16Bytes
			escapes += s.Escapes
			weights += s.Weights()
			entropy += s.ExponentEntropy * float64(s.Weights())
		}
		w := float64(weights)
		want := fmt.Sprintf("total: %d matrices, %d weights: %.3f bits/weight (%.4f× bf16), escape rate %.4f%%, exponent entropy %.3f bits; %s in bf16, %s in lossless12",
			len(stats), weights, 8*float64(bytes)/w, float64(bytes)/float64(bf16), 100*float64(escapes)/w, entropy/w, size(bf16), size(bytes))
		assert.Equal(t, want, lines[len(lines)-1], filepath.Base(dir))
		if filepath.Base(dir) == "tiny" {
			readmeQuotes(t, lines)
		}
	}
	r := execK3(t, "", "", "info", filepath.Join(t.TempDir(), "none"), "--trunk-stats")
	assert.Equal(t, exitRuntime, r.code)
	assert.Contains(t, r.stderr, "none", r.stderr)
}

// readmeQuotes checks that every line the README quotes from the command on the tiny fixture is
// a line the command prints, the total among them.
func readmeQuotes(t *testing.T, lines []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	const cmd = "$ k3 info $K3_FIXTURES/models/tiny --trunk-stats"
	_, block, ok := strings.Cut(string(b), cmd)
	require.True(t, ok, "the README quotes %q", cmd)
	_, block, _ = strings.Cut(block, "\n")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	quoted := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	require.GreaterOrEqual(t, len(quoted), 2)
	for _, q := range quoted {
		assert.Contains(t, lines, q, "README line not printed by the command")
	}
	assert.Equal(t, lines[len(lines)-1], quoted[len(quoted)-1], "the README's total")
}
