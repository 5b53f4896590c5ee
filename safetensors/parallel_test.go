package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// manyTensors builds shards large enough (> the 16k grain) for the
// parallel merge and index verification to run on several goroutines.
func manyTensors(shards, per int) [][]WriteTensor {
	out := make([][]WriteTensor, shards)
	for s := range out {
		for i := 0; i < per; i++ {
			out[s] = append(out[s], WriteTensor{Name: "s" + strconv.Itoa(s) + ".t" + strconv.Itoa(i), DType: U8, Shape: []int64{int64(i % 3)}, Data: make([]byte, i%3)})
		}
	}
	return out
}

func TestParallelOpen(t *testing.T) {
	shards := manyTensors(4, 10000)
	dir := t.TempDir()
	if err := WriteSharded(dir, shards, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{1, 2, 4} {
		c, err := Open(dir, WithWorkers(w))
		if err != nil {
			t.Fatal(err)
		}
		if c.Len() != 40000 || !c.HasIndex() {
			t.Fatalf("workers %d: %d tensors", w, c.Len())
		}
		for s, sh := range shards {
			for _, wt := range sh[:50] {
				tt, ok := c.Tensor(wt.Name)
				if !ok || filepath.Base(tt.File) != ShardFileName(s+1, 4) {
					t.Fatalf("%s: %v", wt.Name, tt)
				}
			}
		}
		c.Close()
	}

	// A duplicate across shards is found whatever the worker count, and
	// reported the same way.
	dup := manyTensors(4, 10000)
	dup[3][9999].Name = dup[0][5].Name
	dir2 := t.TempDir()
	for i, sh := range dup {
		if err := WriteFile(filepath.Join(dir2, ShardFileName(i+1, 4)), sh, nil); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []string
	for _, w := range []int{1, 2, 4, 2, 4} {
		_, err := Open(dir2, WithWorkers(w))
		var e *Error
		if !errors.Is(err, ErrDuplicateTensor) || !errors.As(err, &e) || e.Tensor != dup[0][5].Name {
			t.Fatalf("workers %d: %v", w, err)
		}
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Errorf("error depends on scheduling: %q vs %q", m, msgs[0])
		}
	}

	// An index with one entry pointing at the wrong shard fails the
	// parallel check and is reported by the serial pass.
	idx := filepath.Join(dir, IndexFileName)
	b, _ := os.ReadFile(idx)
	bad := strings.Replace(string(b), `"s2.t777": "`+ShardFileName(3, 4), `"s2.t777": "`+ShardFileName(2, 4), 1)
	if bad == string(b) {
		t.Fatal("edit failed")
	}
	os.WriteFile(idx, []byte(bad), 0o644)
	_, err := Open(dir, WithWorkers(2))
	var e *Error
	if !errors.Is(err, ErrIndexWrongShard) || !errors.As(err, &e) || e.Tensor != "s2.t777" {
		t.Errorf("wrong shard: %v", err)
	}
	// A duplicate weight_map key.
	bad = strings.Replace(string(b), `"s2.t777": "`+ShardFileName(3, 4)+`"`, `"s2.t778": "`+ShardFileName(3, 4)+`"`, 1)
	os.WriteFile(idx, []byte(bad), 0o644)
	if _, err := Open(dir, WithWorkers(2)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("duplicate index key: %v", err)
	}
}
