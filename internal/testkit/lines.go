package testkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// maxLine is the longest line Lines reads.
const maxLine = 16 << 20

// Lines calls fn with the number (from 1) and the bytes of every line of r,
// in order, stopping at fn's first error, which it returns. A line may be up to
// 16 MiB long; the bytes are valid only during the call.
func Lines(r io.Reader, fn func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		if err := fn(n, sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// JSONLines decodes every non-empty line of the file path (JSON lines, as
// the oracle fixtures' expected rows are) into a new T and passes it to fn,
// stopping at the first error.
func JSONLines[T any](path string, fn func(T) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return Lines(f, func(n int, line []byte) error {
		if len(line) == 0 {
			return nil
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		return fn(v)
	})
}

// ReadJSON decodes the file path, one JSON value (a report, an index, a
// fixture's expectations), into a new T, failing the test when the file
// cannot be read or does not decode.
func ReadJSON[T any](tb testing.TB, path string) T {
	tb.Helper()
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return v
}

// TextCase is one text of the tokenizer fixtures' cases.json: its id, file,
// category and size, and the text itself, read from the file.
type TextCase struct {
	ID       string `json:"id"`
	File     string `json:"file"`
	Category string `json:"category"`
	Bytes    int    `json:"bytes"`
	Text     string `json:"-"`
}

// ReadTextCases reads cases.json of the tokenizer fixture directory dir and
// the text of every case, in the order of the file.
func ReadTextCases(dir string) ([]TextCase, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		return nil, err
	}
	var cases []TextCase
	if err := json.Unmarshal(b, &cases); err != nil {
		return nil, fmt.Errorf("cases.json: %w", err)
	}
	for i := range cases {
		t, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(cases[i].File)))
		if err != nil {
			return nil, err
		}
		cases[i].Text = string(t)
	}
	return cases, nil
}

// CorpusTexts returns the texts of cases in order, without the "long"
// category (whose 30,000-byte pieces make quadratic merging dominate) when
// skipLong, and their total size in bytes: the corpus of the tokenizer
// benchmarks.
func CorpusTexts(cases []TextCase, skipLong bool) ([]string, int64) {
	var texts []string
	var n int64
	for _, c := range cases {
		if skipLong && c.Category == "long" {
			continue
		}
		texts = append(texts, c.Text)
		n += int64(len(c.Text))
	}
	return texts, n
}
