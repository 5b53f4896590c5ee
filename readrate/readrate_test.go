package readrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	path, err := TempFile(dir, 3*Chunk, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 3*Chunk {
		t.Fatalf("temp file: %v, %v", st, err)
	}
	if Sparse(path) {
		t.Error("a written file reported sparse")
	}
	for _, c := range []struct {
		r    Result
		want int64
	}{
		{Direct(path, 2, 0, 0), 3 * Chunk},
		{Direct(path, 4, 0, 2*Chunk), 2 * Chunk},
		{Buffered(path, 0), 3 * Chunk},
	} {
		if c.r.Err != nil || c.r.Bytes != c.want || c.r.MBs() <= 0 {
			t.Errorf("%s: %d bytes, %.1f MB/s, %v; want %d bytes", c.r.Method, c.r.Bytes, c.r.MBs(), c.r.Err, c.want)
		}
	}
	if r := Direct(path, 2, 0, 0); !strings.HasPrefix(r.Method, "O_DIRECT queue depth 2") {
		t.Errorf("method %q", r.Method)
	}

	small := filepath.Join(dir, "small.safetensors")
	if err := os.WriteFile(small, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := Direct(small, 1, 0, 0); r.Err == nil || r.MBs() != 0 {
		t.Errorf("a file below one read: %+v", r)
	}
	big := filepath.Join(dir, "big.safetensors")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 * Chunk); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !Sparse(big) {
		t.Error("a truncated-up file is not reported sparse")
	}
	if p, size := LargestShard(dir); p != big || size != 4*Chunk {
		t.Errorf("LargestShard: %s %d", p, size)
	}
	if p, _ := LargestShard(t.TempDir()); p != "" {
		t.Errorf("LargestShard of an empty directory: %q", p)
	}
}

// TestTarget: a model whose shards are small or sparse is measured on a temporary file in its
// directory, removed afterwards; a directory without shards is an error.
func TestTarget(t *testing.T) {
	model := t.TempDir()
	if _, _, err := Target(model, "", Chunk, time.Second); err == nil {
		t.Error("a model directory without shards gave a target")
	}
	if err := os.WriteFile(filepath.Join(model, "a.safetensors"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ model, dir, where string }{{model, "", model}, {"", t.TempDir(), ""}} {
		path, remove, err := Target(c.model, c.dir, Chunk, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.where + c.dir; filepath.Dir(path) != want || strings.HasSuffix(path, ".safetensors") {
			t.Errorf("target %s, want a temporary file in %s", path, want)
		}
		remove()
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", path, err)
		}
	}
}
