package testkit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b", "a", "notamodel"} {
		if err := os.MkdirAll(filepath.Join(dir, "models", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "notamodel" {
			if err := os.WriteFile(filepath.Join(dir, "models", name, "config.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv(EnvVar, dir)
	if got := Dir(t); got != dir {
		t.Fatalf("Dir = %s, want %s", got, dir)
	}
	models := Models(t)
	want := []string{filepath.Join(dir, "models", "a"), filepath.Join(dir, "models", "b")}
	if fmt.Sprint(models) != fmt.Sprint(want) {
		t.Fatalf("Models = %v, want %v (sorted, only directories with a config.json)", models, want)
	}
}

// A missing fixture directory skips outside CI; under CI=true it must fail,
// which is what the child run checks (a failing subtest would fail this one).
func TestMissingFixturesSkipOrFail(t *testing.T) {
	if _, ok := ChildArg("K3_TESTKIT_CHILD"); ok {
		Dir(t)
		fmt.Println("NOTREACHED")
		return
	}
	t.Setenv(EnvVar, filepath.Join(t.TempDir(), "absent"))
	t.Setenv("CI", "")
	var skipped bool
	t.Run("outside CI", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Dir(t)
	})
	if !skipped {
		t.Fatal("a missing fixture directory did not skip outside CI")
	}
	if testing.Short() {
		return
	}
	t.Setenv("CI", "true")
	cmd := childCmd("TestMissingFixturesSkipOrFail", "K3_TESTKIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "NOTREACHED") || !strings.Contains(string(out), "CI=true") {
		t.Fatalf("under CI=true a missing fixture directory must fail the test; err=%v\n%s", err, out)
	}
}

func childCmd(test, env string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	return cmd
}

func TestSparseFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	SparseFile(t, p, 1<<32)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 1<<32 {
		t.Fatalf("size %d, want 2^32", st.Size())
	}
}

func TestCopyDir(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ckpt")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.safetensors"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := CopyDir(t, src)
	if filepath.Base(dst) != "ckpt" || dst == src {
		t.Fatalf("copy at %s", dst)
	}
	got, err := os.ReadFile(filepath.Join(dst, "a.safetensors"))
	if err != nil || string(got) != "weights" {
		t.Fatalf("copied file: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "sub")); !os.IsNotExist(err) {
		t.Fatalf("the subdirectory was copied: %v", err)
	}
}

// Every fixture model's reference is consistent.
func TestLoadReference(t *testing.T) {
	for _, dir := range Models(t) {
		r := LoadReference(t, dir)
		if r.Vocab <= 0 || len(r.LogitsBits[0]) != r.Vocab {
			t.Errorf("%s: vocab %d, %d logits a position", dir, r.Vocab, len(r.LogitsBits[0]))
		}
	}
}

func TestFlipBits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	orig := []byte{0x00, 0xff, 0x10, 0x01}
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	FlipBits(t, p, 2, 0x11)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x00, 0xff, 0x01, 0x01}; !bytes.Equal(got, want) {
		t.Fatalf("after one flip: % x, want % x", got, want)
	}
	FlipBits(t, p, 2, 0x11)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, orig) {
		t.Fatalf("after flipping back: % x, want % x", got, orig)
	}
}

func TestHideHeaderKey(t *testing.T) {
	dir := t.TempDir()
	header := `{"__metadata__":{"colibri.fmt":"x"}}`
	shard := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	shard = append(append(shard, header...), 1, 2, 3, 4)
	for _, name := range []string{"a.safetensors", "b.safetensors"} {
		if err := os.WriteFile(filepath.Join(dir, name), shard, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := HideHeaderKey(t, dir, "colibri.fmt"); n != 2 {
		t.Fatalf("%d shards changed, want 2", n)
	}
	got, err := os.ReadFile(filepath.Join(dir, "b.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(shard, []byte(`"colibri.fmt"`), []byte(`"colibri.fmX"`), 1)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if n := HideHeaderKey(t, dir, "colibri.fmt"); n != 0 {
		t.Fatalf("the key was found again in %d shards", n)
	}
}

func TestEditTextConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, []byte(`{"model_type":"k","text_config":{"hidden_size":8,"num_experts":4}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	EditTextConfig(t, dir, func(tc map[string]any) {
		tc["hidden_size"] = 16
		delete(tc, "num_experts")
	})
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		ModelType  string         `json:"model_type"`
		TextConfig map[string]any `json:"text_config"`
	}
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	if root.ModelType != "k" || len(root.TextConfig) != 1 || root.TextConfig["hidden_size"] != 16.0 {
		t.Fatalf("after the edit: %s", b)
	}
}

func TestLines(t *testing.T) {
	long := strings.Repeat("x", 1<<20) // past bufio's default token size
	var got []string
	var nums []int
	err := Lines(strings.NewReader("a\n\n"+long+"\nlast"), func(n int, line []byte) error {
		nums = append(nums, n)
		got = append(got, string(line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "", long, "last"}) || !slices.Equal(nums, []int{1, 2, 3, 4}) {
		t.Errorf("lines %d, numbers %v", len(got), nums)
	}
	stop := errors.New("stop")
	calls := 0
	if err := Lines(strings.NewReader("a\nb\n"), func(int, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("fn's error: got %v after %d calls, want stop after 1", err, calls)
	}
}

func TestJSONLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(p, []byte("{\"id\":\"a\",\"ordinary\":[1,2]}\n\n{\"id\":\"b\",\"ordinary\":[]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID       string `json:"id"`
		Ordinary []int  `json:"ordinary"`
	}
	var rows []row
	if err := JSONLines(p, func(r row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "a" || !slices.Equal(rows[0].Ordinary, []int{1, 2}) || rows[1].ID != "b" {
		t.Errorf("rows %+v", rows)
	}
	if err := os.WriteFile(p, []byte("{\"id\":\"a\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := JSONLines(p, func(row) error { return nil }); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("a bad line 2: %v", err)
	}
	if err := JSONLines(filepath.Join(t.TempDir(), "none"), func(row) error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestReadJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(p, []byte(`{"id":"a","ordinary":[1,2]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID       string `json:"id"`
		Ordinary []int  `json:"ordinary"`
	}
	if r := ReadJSON[row](t, p); r.ID != "a" || !slices.Equal(r.Ordinary, []int{1, 2}) {
		t.Errorf("row %+v", r)
	}
	if m := ReadJSON[map[string]any](t, p); len(m) != 2 || m["id"] != "a" {
		t.Errorf("map %v", m)
	}
}

func TestTextCases(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"cases.json":  `[{"id":"s","file":"texts/s.txt","category":"short","bytes":2},{"id":"l","file":"texts/l.txt","category":"long","bytes":4}]`,
		"texts/s.txt": "hi",
		"texts/l.txt": "long",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases, err := ReadTextCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0].Text != "hi" || cases[1].Text != "long" || cases[1].Category != "long" || cases[0].Bytes != 2 {
		t.Fatalf("cases %+v", cases)
	}
	if texts, n := CorpusTexts(cases, false); !slices.Equal(texts, []string{"hi", "long"}) || n != 6 {
		t.Errorf("all: %q, %d bytes", texts, n)
	}
	if texts, n := CorpusTexts(cases, true); !slices.Equal(texts, []string{"hi"}) || n != 2 {
		t.Errorf("without long: %q, %d bytes", texts, n)
	}
}

// TestModuleRootSkipsNestedModules: from a package of a nested module (examples/k3 has a
// go.mod of its own) the fixtures are looked for beside the repository's root module, which
// is the go.mod declaring github.com/k3-project/k3, not beside the nearest go.mod.
func TestModuleRootSkipsNestedModules(t *testing.T) {
	repo := t.TempDir()
	nested := filepath.Join(repo, "examples", "k3")
	pkg := filepath.Join(nested, "internal", "serve")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for dir, text := range map[string]string{
		repo:   "module \"github.com/k3-project/k3\"\n\ngo 1.26\n",
		nested: "module github.com/k3-project/k3/examples/k3\n\ngo 1.26\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(pkg)
	got, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ = filepath.EvalSymlinks(got); got != want {
		t.Errorf("moduleRoot from %s = %s, want %s", pkg, got, want)
	}
}
