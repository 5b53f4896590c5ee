package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
