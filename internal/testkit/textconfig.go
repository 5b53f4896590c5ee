package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// EditTextConfig rewrites the config.json of the model in dir through fn, which
// edits its decoded text_config in place (a synthetic model's config is
// nested). It fails the test when the file cannot be read, has no
// text_config object or cannot be written back.
func EditTextConfig(tb testing.TB, dir string, fn func(tc map[string]any)) {
	tb.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		tb.Fatalf("%s: %v", p, err)
	}
	tc, ok := root["text_config"].(map[string]any)
	if !ok {
		tb.Fatalf("%s: no text_config object", p)
	}
	fn(tc)
	if b, err = json.Marshal(root); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}
