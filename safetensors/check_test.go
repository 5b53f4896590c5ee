package safetensors_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/k3-project/k3/safetensors"
)

// writeShards writes two shards of F32 tensors and, when index is true, the
// index placing each tensor; it returns the shard names and sizes.
func writeShards(t *testing.T, dir string, index bool) map[string]int64 {
	t.Helper()
	weightMap := map[string]string{}
	sizes := map[string]int64{}
	var total int64
	for s, names := range [][]string{{"a", "b"}, {"c"}} {
		shard := "model-0000" + strconv.Itoa(s+1) + "-of-00002.safetensors"
		var ts []safetensors.WriteTensor
		for i, n := range names {
			ts = append(ts, safetensors.WriteTensor{Name: n, DType: safetensors.F32, Shape: []int64{int64(4 + i)}, Data: make([]byte, 4*(4+i))})
			weightMap[n] = shard
			total += int64(4 * (4 + i))
		}
		path := filepath.Join(dir, shard)
		if err := safetensors.WriteFile(path, ts, nil); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes[shard] = st.Size()
	}
	if index {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFileName), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sizes
}

func TestCheckDir(t *testing.T) {
	for _, index := range []bool{true, false} {
		dir := t.TempDir()
		want := writeShards(t, dir, index)
		sizes, problems, err := safetensors.CheckDir(dir)
		if err != nil || len(problems) > 0 {
			t.Fatalf("index %v: %v %v", index, problems, err)
		}
		if len(sizes) != 2 || sizes["model-00001-of-00002.safetensors"] != want["model-00001-of-00002.safetensors"] {
			t.Errorf("index %v: sizes %v, want %v", index, sizes, want)
		}
	}
	if _, _, err := safetensors.CheckDir(t.TempDir()); err == nil {
		t.Error("an empty directory passed")
	}
}

// TestCheckDirProblems: every broken shard is named, each with its own
// problem, in one call.
func TestCheckDirProblems(t *testing.T) {
	dir := t.TempDir()
	sizes := writeShards(t, dir, true)
	first, second := filepath.Join(dir, "model-00001-of-00002.safetensors"), filepath.Join(dir, "model-00002-of-00002.safetensors")
	if err := os.Truncate(first, sizes["model-00001-of-00002.safetensors"]-3); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(second); err != nil {
		t.Fatal(err)
	}
	_, problems, err := safetensors.CheckDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"model-00001-of-00002.safetensors: truncated: " + strconv.FormatInt(sizes["model-00001-of-00002.safetensors"]-3, 10) +
			" bytes, its header describes " + strconv.FormatInt(sizes["model-00001-of-00002.safetensors"], 10),
		"model-00002-of-00002.safetensors: missing (the index names it)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The index places a tensor in a shard that lacks it, and its total_size is off.
	dir = t.TempDir()
	writeShards(t, dir, false)
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1},
		"weight_map": map[string]string{"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"}})
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, problems, _ = safetensors.CheckDir(dir)
	if len(problems) != 1 || !strings.Contains(problems[0].String(), "model-00002-of-00002.safetensors: lacks 1 tensor(s) the index places in it, the first d") {
		t.Errorf("lacking tensor: %v", problems)
	}
	b, _ = json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1},
		"weight_map": map[string]string{"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, problems, _ = safetensors.CheckDir(dir)
	if len(problems) != 1 || problems[0].File != safetensors.IndexFileName || !strings.Contains(problems[0].Msg, "total_size 1, the shards hold 52 tensor bytes") {
		t.Errorf("total_size: %v", problems)
	}
}
