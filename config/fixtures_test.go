package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

func TestK3Testdata(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "k3_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := K3(); !reflect.DeepEqual(c, want) {
		t.Fatalf("testdata/k3_config.json:\n got %+v\nwant %+v", c, want)
	}
}

// Every fixture model parses, validates, and agrees with the reference
// file's vocabulary and with an independent encoding/json reading.
func TestFixtureModels(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			path := filepath.Join(dir, "config.json")
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			checkAgainstEncodingJSON(t, path, c)
			if _, err := os.Stat(filepath.Join(dir, "reference.json")); err == nil {
				if r := testkit.LoadReference(t, dir); r.Vocab != c.Vocab {
					t.Errorf("reference.json vocab %d, config %d", r.Vocab, c.Vocab)
				}
			}
			// Both fixtures share the tiny layer map (§2.6).
			if got := c.LayerKinds(); got != "KKKMKKKMKKKMM" {
				t.Errorf("LayerKinds = %s", got)
			}
		})
	}
}

// checkAgainstEncodingJSON re-reads the file with encoding/json and a
// deliberately simple resolver (nested: linear_attn_config / text_config /
// root; flat: root) and compares every field.
func checkAgainstEncodingJSON(t *testing.T, path string, c *Config) {
	t.Helper()
	root := testkit.ReadJSON[map[string]any](t, path)
	get := func(names ...string) any {
		var scopes []map[string]any
		if tc, ok := root["text_config"].(map[string]any); ok {
			if a, ok := tc["linear_attn_config"].(map[string]any); ok {
				scopes = append(scopes, a)
			}
			scopes = append(scopes, tc)
		}
		scopes = append(scopes, root)
		for _, s := range scopes {
			for _, n := range names {
				if v, ok := s[n]; ok {
					return v
				}
			}
		}
		t.Fatalf("%s: none of %v", path, names)
		return nil
	}
	num := func(names ...string) float64 { return get(names...).(float64) }
	ints := func(names ...string) []int {
		var out []int
		for _, v := range get(names...).([]any) {
			out = append(out, int(v.(float64)))
		}
		return out
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"hidden", float64(c.Hidden), num("hidden_size")},
		{"layers", float64(c.NumLayers), num("num_hidden_layers")},
		{"vocab", float64(c.Vocab), num("vocab_size")},
		{"eps", c.RMSEps, num("rms_norm_eps")},
		{"kda heads", float64(c.KDAHeads), num("num_heads", "kda_num_heads")},
		{"kda head dim", float64(c.KDAHeadDim), num("head_dim", "kda_head_dim")},
		{"conv", float64(c.ConvK), num("short_conv_kernel_size")},
		{"gate lb", c.GateLB, num("gate_lower_bound")},
		{"mla heads", float64(c.MLAHeads), num("num_attention_heads")},
		{"q lora", float64(c.QLoRA), num("q_lora_rank")},
		{"kv lora", float64(c.KVLoRA), num("kv_lora_rank")},
		{"nope", float64(c.QKNope), num("qk_nope_head_dim")},
		{"rope", float64(c.QKRope), num("qk_rope_head_dim")},
		{"v head", float64(c.VHead), num("v_head_dim")},
		{"experts", float64(c.NumExperts), num("num_experts")},
		{"top k", float64(c.TopK), num("num_experts_per_token")},
		{"shared", float64(c.NumShared), num("num_shared_experts")},
		{"latent", float64(c.Latent), num("routed_expert_hidden_size")},
		{"moe inter", float64(c.MoEInter), num("moe_intermediate_size")},
		{"routed scale", c.RoutedScale, num("routed_scaling_factor")},
		{"first dense", float64(c.FirstDense), num("first_k_dense_replace")},
		{"dense inter", float64(c.DenseInter), num("intermediate_size")},
		{"block", float64(c.AttnResBlock), num("attn_res_block_size")},
		{"beta", c.SiTUBeta, num("activation_situ_beta", "situ_beta")},
		{"linear beta", c.SiTULinearBeta, num("activation_situ_linear_beta", "situ_linear_beta")},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: %s = %v, encoding/json reads %v", path, ch.name, ch.got, ch.want)
		}
	}
	if !reflect.DeepEqual(c.FullAttn, ints("full_attn_layers")) {
		t.Errorf("full_attn_layers %v", c.FullAttn)
	}
	bools := []struct {
		got  bool
		name string
	}{{c.MLAOutGate, "mla_use_output_gate"}, {c.MoERenorm, "moe_renormalize"}, {c.LatentNorm, "latent_moe_use_norm"}}
	for _, b := range bools {
		if b.got != get(b.name).(bool) {
			t.Errorf("%s = %v", b.name, b.got)
		}
	}
}

func TestFixtureTinyIsSpecTiny(t *testing.T) {
	c, err := Load(testkit.Path(t, "models/tiny/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := tinyWant(); !reflect.DeepEqual(c, want) {
		t.Fatalf("models/tiny:\n got %+v\nwant %+v", c, want)
	}
}

func TestFixtureWide(t *testing.T) {
	c, err := Load(testkit.Path(t, "models/wide/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := tinyWant()
	want.NumExperts, want.TopK, want.DenseInter = 64, 8, 512 // §13.2
	want.KDALayers = nil                                     // the flat file has no kda_layers
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("models/wide:\n got %+v\nwant %+v", c, want)
	}
}

// manifestConfig returns the raw "config" member of ops/MANIFEST.json.
func manifestConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(testkit.Path(t, "ops/MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Config) == 0 {
		t.Fatal("MANIFEST.json has no config member")
	}
	return m.Config
}

// The nested tiny model and the flat MANIFEST config describe the same
// geometry except moe_intermediate_size (64 vs 48) and the optional
// kda_layers the flat file omits.
func TestNestedTinyVersusFlatManifest(t *testing.T) {
	nested, err := Load(testkit.Path(t, "models/tiny/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	flat, err := Parse(manifestConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	nv, fv := reflect.ValueOf(*nested), reflect.ValueOf(*flat)
	for i := 0; i < nv.NumField(); i++ {
		name := nv.Type().Field(i).Name
		a, b := nv.Field(i).Interface(), fv.Field(i).Interface()
		switch name {
		case "MoEInter":
			if a != 64 || b != 48 {
				t.Errorf("MoEInter: nested %v flat %v, want 64 and 48", a, b)
			}
		case "KDALayers":
			if fv.Field(i).Len() != 0 || !reflect.DeepEqual(a, tinyWant().KDALayers) {
				t.Errorf("KDALayers: nested %v flat %v", a, b)
			}
		default:
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: nested %v, flat %v", name, a, b)
			}
		}
	}
	if nested.LayerKinds() != flat.LayerKinds() || nested.Summary() == "" {
		t.Error("layer maps differ")
	}
}

// Every file in cfg/ is refused with an error naming the offending field;
// the three known files with the specific problem of §2.5.
func TestFixtureBadConfigs(t *testing.T) {
	dir := testkit.Path(t, "cfg")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]func(*ConfigError) bool{
		"no_layermap.json": func(ce *ConfigError) bool {
			return reflect.DeepEqual(ce.Missing, []string{"full_attn_layers"}) && len(ce.Invalid)+len(ce.Violations) == 0
		},
		"bad_layer_index.json": func(ce *ConfigError) bool {
			return len(ce.Missing)+len(ce.Invalid) == 0 &&
				reflect.DeepEqual(ce.Violations, []string{"full_attn_layers[2] = 999 is outside 1..13 (entries are one-based layer numbers)"})
		},
		"bad_topk.json": func(ce *ConfigError) bool {
			return len(ce.Missing)+len(ce.Invalid) == 0 &&
				containsEntry(ce.Violations, "num_experts_per_token = 128 exceeds num_experts = 8")
		},
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			c, err := Load(filepath.Join(dir, e.Name()))
			if err == nil {
				t.Fatalf("accepted: %s", c.Summary())
			}
			if !strings.Contains(err.Error(), e.Name()) {
				t.Errorf("error does not name the file: %v", err)
			}
			ce := configError(t, err)
			if check, ok := known[e.Name()]; ok && !check(ce) {
				t.Errorf("unexpected report: %+v", ce)
			}
			// Whatever the file, the report names at least one field.
			all := strings.Join(append(append(append([]string{}, ce.Missing...), ce.Invalid...), ce.Violations...), " ")
			if !strings.ContainsAny(all, "_") {
				t.Errorf("report names no field: %v", err)
			}
		})
	}
	for name := range known {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("known bad config %s: %v", name, err)
		}
	}
	if n < 3 {
		t.Errorf("only %d files in cfg/", n)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "absent.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
	// A sparse file one byte over the limit is refused before it is read.
	big := filepath.Join(dir, "big.json")
	testkit.SparseFile(t, big, MaxFileSize+1)
	if _, err := Load(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("a directory was accepted")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"hidden_size": 1,}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("trailing comma: %v", err)
	}
}
