package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// FuzzParse: Parse never panics; anything it accepts is valid, has a
// consistent layer map and survives MarshalNested → Parse unchanged;
// anything it refuses is refused with ErrInvalidJSON or a non-empty
// *ConfigError.
func FuzzParse(f *testing.F) {
	if k3, err := os.ReadFile(filepath.Join("testdata", "k3_config.json")); err == nil {
		f.Add(k3)
	}
	f.Add([]byte(tinyNested().render()))
	f.Add([]byte(tinyFlat().render()))
	f.Add([]byte(tinyNested().with(tc+"linear_attn_config", "1").with(tc+"eos_token_id", "[1,2]").render()))
	f.Add([]byte(tinyFlat().with("full_attn_layers", "[4, 4, 99]").with("num_expert_group", "3").render()))
	f.Add([]byte(`{"text_config": []}`))
	// The oracle fixture configs (read at fuzz time, never copied).
	dir := testkit.Dir(f)
	paths, _ := filepath.Glob(filepath.Join(dir, "models", "*", "config.json"))
	more, _ := filepath.Glob(filepath.Join(dir, "cfg", "*.json"))
	for _, p := range append(paths, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "ops", "MANIFEST.json")); err == nil {
		var m struct {
			Config json.RawMessage `json:"config"`
		}
		if json.Unmarshal(data, &m) == nil {
			f.Add([]byte(m.Config))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var ce *ConfigError
			switch {
			case errors.Is(err, ErrInvalidJSON):
			case errors.As(err, &ce):
				if ce.empty() {
					t.Fatal("empty ConfigError")
				}
			default:
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		if c.NumMLA()+c.NumKDA() != c.NumLayers || len(c.LayerKinds()) != c.NumLayers || c.NumMLA() != len(c.FullAttn) {
			t.Fatalf("inconsistent layer map: %s", c.Summary())
		}
		out, err := MarshalNested(c)
		if err != nil {
			t.Fatalf("MarshalNested: %v", err)
		}
		back, err := Parse(out)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
	})
}
