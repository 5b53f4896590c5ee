package tokenizer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/regfile"
)

func TestRankFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "tiktoken.model")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxRankFileSize+1)) // sparse: refused before reading
	require.NoError(t, f.Close())
	_, err = LoadRanks(big)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = ReadRanks(bytes.NewReader(make([]byte, MaxRankFileSize+1)))
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = LoadRanks(dir)
	assert.ErrorIs(t, err, regfile.ErrNotRegular)
}

func TestTokenizerConfigSizeLimit(t *testing.T) {
	dir := t.TempDir()
	ranks := filepath.Join(dir, "tiktoken.model")
	require.NoError(t, os.WriteFile(ranks, collisionFile(t, 0, true), 0o644))
	cfg := filepath.Join(dir, "tokenizer_config.json")
	f, err := os.Create(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxConfigFileSize+1))
	require.NoError(t, f.Close())
	_, err = LoadKimi(ranks, cfg)
	assert.ErrorIs(t, err, ErrTooLarge)
	r, err := LoadRanks(ranks)
	require.NoError(t, err)
	_, err = NewKimi(r, make([]byte, MaxConfigFileSize+1))
	assert.ErrorIs(t, err, ErrTooLarge)
}
