package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

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
