package tokenizer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/k3-project/k3/internal/testkit"
)

func TestRankFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "tiktoken.model")
	testkit.SparseFile(t, big, MaxRankFileSize+1)
	_, err := LoadRanks(big)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v, want ErrTooLarge", err)
	}
	_, err = ReadRanks(bytes.NewReader(make([]byte, MaxRankFileSize+1)))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v, want ErrTooLarge", err)
	}
	_, err = LoadRanks(dir)
	if !errors.Is(err, regular.ErrNotRegular) {
		t.Errorf("%v, want regular.ErrNotRegular", err)
	}
}

func TestTokenizerConfigSizeLimit(t *testing.T) {
	dir := t.TempDir()
	ranks := filepath.Join(dir, "tiktoken.model")
	if err := os.WriteFile(ranks, collisionFile(t, 0, true), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	testkit.SparseFile(t, cfg, MaxConfigFileSize+1)
	_, err := LoadKimi(ranks, cfg)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v, want ErrTooLarge", err)
	}
	r, err := LoadRanks(ranks)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewKimi(r, make([]byte, MaxConfigFileSize+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v, want ErrTooLarge", err)
	}
}
