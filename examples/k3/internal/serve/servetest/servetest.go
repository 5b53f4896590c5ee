// Package servetest gives the server's tests a tokenizer for the oracle fixture models, which
// ship none: a Kimi-layout tokenizer of 256 single-byte ranks (no merges) in which the ids a
// reference sequence uses are letters and digits, so that its prompt can be sent as text and its
// continuation reads as text, both known without running the tokenizer under test.
package servetest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// alnum are the bytes given to the ids of the reference sequence, in order of first use.
const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Tokenizer is a written tokenizer directory and its byte table.
type Tokenizer struct {
	Dir    string
	ByteOf [256]byte // ByteOf[id] is the one byte id decodes to
}

// Write writes the tokenizer for a 256-id vocabulary into a new temporary directory. Every id in
// use (at most 62 distinct ones) decodes to a letter or digit; the other ids take the remaining
// bytes in increasing order. The specials [BOS], [EOS] and <|end_of_msg|> are ids 256..258.
func Write(tb testing.TB, use []int) *Tokenizer {
	tb.Helper()
	tk := &Tokenizer{Dir: tb.TempDir()}
	var order []int // ids in the order they take bytes
	for _, id := range use {
		if id < 0 || id > 255 {
			tb.Fatalf("servetest: id %d is not a byte id", id)
		}
		if !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	if len(order) > len(alnum) {
		tb.Fatalf("servetest: %d distinct ids, at most %d", len(order), len(alnum))
	}
	taken := [256]bool{}
	assigned := [256]bool{}
	for i, id := range order {
		tk.ByteOf[id] = alnum[i]
		taken[alnum[i]], assigned[id] = true, true
	}
	next := 0
	for id := range 256 {
		if assigned[id] {
			continue
		}
		for taken[next] {
			next++
		}
		tk.ByteOf[id], taken[next] = byte(next), true
	}
	var ranks strings.Builder
	for id, b := range tk.ByteOf {
		fmt.Fprintf(&ranks, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{b}), id)
	}
	cfg, err := json.Marshal(map[string]any{
		"added_tokens_decoder": map[string]any{
			"256": map[string]any{"content": "[BOS]", "special": true},
			"257": map[string]any{"content": "[EOS]", "special": true},
			"258": map[string]any{"content": "<|end_of_msg|>", "special": true},
		},
		"model_max_length": 1 << 20,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tk.Dir, "tiktoken.model"), []byte(ranks.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tk.Dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		tb.Fatal(err)
	}
	return tk
}

// Text is what ids decode to by the byte table (not by the tokenizer).
func (tk *Tokenizer) Text(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = tk.ByteOf[id]
	}
	return string(b)
}
