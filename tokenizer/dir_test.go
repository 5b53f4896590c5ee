package tokenizer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/k3-project/k3/internal/testkit"
)

// TestLoadDir: the directory's two files make the encoding; a missing one
// is an error naming it.
func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RanksFileName), []byte(byteFile()+b64("ab")+" 256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if InDir(dir) {
		t.Errorf("InDir with %s alone", RanksFileName)
	}
	_, err := LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), ConfigFileName) {
		t.Fatalf("missing %s: %v", ConfigFileName, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), kimiConfig(map[int]string{258: "[EOS]"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if !InDir(dir) {
		t.Errorf("InDir false with both files")
	}
	enc, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := enc.SpecialTokens()["[EOS]"]; !ok || id != 258 {
		t.Errorf("[EOS] = %d, %v; want 258 from the directory's config", id, ok)
	}
	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), RanksFileName) {
		t.Errorf("empty directory: %v", err)
	}
}

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
