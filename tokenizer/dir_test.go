package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
