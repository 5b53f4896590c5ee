package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Reference is a fixture model's reference.json (§13.2): a prompt, its
// greedy continuation (FullIDs holds both), the teacher-forced predictions
// over FullIDs and the bits of the reference float32 logits at each of its
// positions.
type Reference struct {
	PromptIDs  []int      `json:"prompt_ids"`
	FullIDs    []int      `json:"full_ids"`
	TFPred     []int      `json:"tf_pred"`
	Vocab      int        `json:"vocab"`
	LogitsBits [][]uint32 `json:"logits_bits"`
}

// LoadReference reads dir/reference.json, failing the test when it is
// missing, malformed, or inconsistent (no continuation, or per-position
// lists of another length than FullIDs).
func LoadReference(tb testing.TB, dir string) *Reference {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatalf("%s: %v", dir, err)
	}
	if len(r.FullIDs) <= len(r.PromptIDs) || len(r.TFPred) != len(r.FullIDs) || len(r.LogitsBits) != len(r.FullIDs) {
		tb.Fatalf("%s: inconsistent reference.json", dir)
	}
	return &r
}
