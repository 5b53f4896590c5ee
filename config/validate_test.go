package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
)

// TestValidateRules has one case per rule of §2.5 (and the library
// limits): a change to the valid K3 config and the violation it must cause,
// or "" when the change is allowed.
func TestValidateRules(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name string
		edit func(c *Config)
		want string // substrings of the expected violations, one each, "|"-separated; "" = valid
	}{
		// rule 1
		{"hidden 0", func(c *Config) { c.Hidden = 0 }, "hidden_size = 0, must be ≥ 1"},
		{"layers 0", func(c *Config) { c.NumLayers, c.FirstDense, c.FullAttn, c.KDALayers = 0, 0, nil, nil }, "num_hidden_layers = 0, must be ≥ 1|full_attn_layers is empty"},
		{"vocab -1", func(c *Config) { c.Vocab = -1 }, "vocab_size = -1, must be ≥ 1"},
		{"kda heads 0", func(c *Config) { c.KDAHeads = 0 }, "num_heads (kda_num_heads) = 0"},
		{"kda head dim 0", func(c *Config) { c.KDAHeadDim = 0 }, "head_dim (kda_head_dim) = 0"},
		{"conv 0", func(c *Config) { c.ConvK = 0 }, "short_conv_kernel_size = 0"},
		{"mla heads 0", func(c *Config) { c.MLAHeads = 0 }, "num_attention_heads = 0"},
		{"q lora 0", func(c *Config) { c.QLoRA = 0 }, "q_lora_rank = 0"},
		{"kv lora 0", func(c *Config) { c.KVLoRA = 0 }, "kv_lora_rank = 0"},
		{"nope 0", func(c *Config) { c.QKNope = 0 }, "qk_nope_head_dim = 0"},
		{"rope 0 allowed", func(c *Config) { c.QKRope = 0 }, ""},
		{"rope -1", func(c *Config) { c.QKRope = -1 }, "qk_rope_head_dim = -1, must be ≥ 0"},
		{"v head 0", func(c *Config) { c.VHead = 0 }, "v_head_dim = 0"},
		{"experts 0", func(c *Config) { c.NumExperts, c.TopK = 0, 1 }, "num_experts = 0, must be ≥ 1|num_experts_per_token = 1 exceeds num_experts = 0"},
		{"shared 0 allowed", func(c *Config) { c.NumShared = 0 }, ""},
		{"shared -1", func(c *Config) { c.NumShared = -1 }, "num_shared_experts = -1, must be ≥ 0"},
		{"latent 0", func(c *Config) { c.Latent = 0 }, "routed_expert_hidden_size = 0"},
		{"moe inter 0", func(c *Config) { c.MoEInter = 0 }, "moe_intermediate_size = 0"},
		{"block 0", func(c *Config) { c.AttnResBlock = 0 }, "attn_res_block_size = 0"},
		{"block larger than model allowed", func(c *Config) { c.AttnResBlock = 1000 }, ""},
		{"first dense -1", func(c *Config) { c.FirstDense = -1 }, "first_k_dense_replace = -1 is outside 0..93"},
		{"first dense 94", func(c *Config) { c.FirstDense = 94 }, "first_k_dense_replace = 94 is outside 0..93"},
		{"first dense all layers allowed", func(c *Config) { c.FirstDense = 93 }, ""},
		{"dense inter 0 with dense layer", func(c *Config) { c.DenseInter = 0 }, "intermediate_size = 0, must be ≥ 1 when first_k_dense_replace = 1 > 0"},
		{"dense inter 0 without dense layer", func(c *Config) { c.DenseInter, c.FirstDense = 0, 0 }, ""},
		{"dense inter negative", func(c *Config) { c.DenseInter, c.FirstDense = -5, 0 }, "intermediate_size = -5, must be ≥ 0"},
		{"size over library limit", func(c *Config) { c.Vocab = MaxDim + 1 }, "vocab_size = 16777217 exceeds the library limit 16777216"},
		// rule 2
		{"eps 0", func(c *Config) { c.RMSEps = 0 }, "rms_norm_eps = 0, must be finite and > 0"},
		{"eps negative", func(c *Config) { c.RMSEps = -1e-5 }, "rms_norm_eps = -1e-05"},
		{"eps NaN", func(c *Config) { c.RMSEps = nan }, "rms_norm_eps = NaN"},
		{"eps Inf", func(c *Config) { c.RMSEps = inf }, "rms_norm_eps = +Inf"},
		{"gate lb 0", func(c *Config) { c.GateLB = 0 }, "gate_lower_bound = 0, must be finite and < 0"},
		{"gate lb positive", func(c *Config) { c.GateLB = 5 }, "gate_lower_bound = 5"},
		{"gate lb -Inf", func(c *Config) { c.GateLB = -inf }, "gate_lower_bound = -Inf"},
		{"gate lb NaN", func(c *Config) { c.GateLB = nan }, "gate_lower_bound = NaN"},
		{"beta 0", func(c *Config) { c.SiTUBeta = 0 }, "activation_situ_beta (situ_beta) = 0"},
		{"linear beta NaN", func(c *Config) { c.SiTULinearBeta = nan }, "activation_situ_linear_beta (situ_linear_beta) = NaN"},
		{"linear beta Inf", func(c *Config) { c.SiTULinearBeta = inf }, "activation_situ_linear_beta (situ_linear_beta) = +Inf"},
		{"routed scale negative", func(c *Config) { c.RoutedScale = -1 }, "routed_scaling_factor = -1"},
		{"routed scale 2.5 allowed", func(c *Config) { c.RoutedScale = 2.5 }, ""},
		// rule 3
		{"full attn nil", func(c *Config) { c.FullAttn, c.KDALayers = nil, nil }, "full_attn_layers is empty"},
		{"full attn empty", func(c *Config) { c.FullAttn, c.KDALayers = []int{}, nil }, "full_attn_layers is empty"},
		{"full attn zero-based 0", func(c *Config) { c.FullAttn[0], c.KDALayers = 0, nil }, "full_attn_layers[0] = 0 is outside 1..93"},
		{"full attn 94", func(c *Config) { c.FullAttn[23], c.KDALayers = 94, nil }, "full_attn_layers[23] = 94 is outside 1..93"},
		{"full attn duplicate", func(c *Config) { c.FullAttn[1], c.KDALayers = 4, nil }, "full_attn_layers[1] = 4 repeats full_attn_layers[0]"},
		{"full attn unordered allowed", func(c *Config) { c.FullAttn[0], c.FullAttn[23] = 93, 4 }, ""},
		{"all layers MLA", func(c *Config) {
			c.FullAttn, c.KDALayers = nil, nil
			for l := 1; l <= 93; l++ {
				c.FullAttn = append(c.FullAttn, l)
			}
		}, "full_attn_layers has 93 entries for 93 layers: at least one layer must be KDA"},
		// rule 4
		{"kda layers absent allowed", func(c *Config) { c.KDALayers = nil }, ""},
		{"kda layers reordered allowed", func(c *Config) { c.KDALayers[0], c.KDALayers[68] = c.KDALayers[68], c.KDALayers[0] }, ""},
		{"kda layers missing one", func(c *Config) { c.KDALayers = c.KDALayers[1:] }, "kda_layers must be {1..93} minus full_attn_layers: missing: [1]"},
		{"kda layers with an MLA layer", func(c *Config) { c.KDALayers = append(c.KDALayers, 4) }, "also in full_attn_layers: [4]"},
		{"kda layers out of range", func(c *Config) { c.KDALayers[0] = 0 }, "outside 1..num_hidden_layers: [0]; missing: [1]"},
		{"kda layers repeated", func(c *Config) { c.KDALayers = append(c.KDALayers, 2) }, "repeated: [2]"},
		{"kda layers empty", func(c *Config) { c.KDALayers = []int{} }, "missing: [1 2 3 5 6 7 9 10 11 13 14 15 17 18 19 21 … 53 more]"},
		// rule 5
		{"top k 0", func(c *Config) { c.TopK = 0 }, "num_experts_per_token = 0, must be ≥ 1"},
		{"top k > experts", func(c *Config) { c.NumExperts = 8 }, "num_experts_per_token = 16 exceeds num_experts = 8"},
		{"top k = experts allowed", func(c *Config) { c.TopK = 16; c.NumExperts = 16 }, ""},
		{"top k 64 allowed", func(c *Config) { c.TopK = 64 }, ""},
		{"top k 65", func(c *Config) { c.TopK = 65 }, "num_experts_per_token = 65 exceeds the library limit 64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := K3()
			tc.edit(c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ce := configError(t, err)
			wants := strings.Split(tc.want, "|")
			if len(ce.Violations) != len(wants) || len(ce.Missing)+len(ce.Invalid) != 0 {
				t.Fatalf("Violations = %q, want %d containing %q", ce.Violations, len(wants), wants)
			}
			for i, w := range wants {
				if !strings.Contains(ce.Violations[i], w) {
					t.Errorf("Violations[%d] = %q, want it to contain %q", i, ce.Violations[i], w)
				}
			}
			// MarshalNested refuses what Validate refuses.
			if _, err := MarshalNested(c); err == nil {
				t.Error("MarshalNested wrote an invalid config")
			}
		})
	}
}

// The same rules apply to a file: Parse runs Validate.
func TestParseRunsValidate(t *testing.T) {
	cases := map[string]doc{
		"num_hidden_layers = 0":                         tinyFlat().with("num_hidden_layers", "0"),
		"full_attn_layers[0] = 0 is outside 1..13":      tinyFlat().with("full_attn_layers", "[0, 4, 8, 12]"),
		"kda_layers must be {1..13} minus":              tinyNested().with(la+"kda_layers", "[1, 2, 3]"),
		"num_experts_per_token = 9 exceeds num_experts": tinyFlat().with("num_experts_per_token", "9"),
		"gate_lower_bound = 0":                          tinyFlat().with("gate_lower_bound", "0.0"),
	}
	for want, d := range cases {
		_, err := Parse([]byte(d.render()))
		ce := configError(t, err)
		if !containsEntry(ce.Violations, want) {
			t.Errorf("%s: %q", want, ce.Violations)
		}
	}
}

func TestValidateK3AndTiny(t *testing.T) {
	if err := K3().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := tinyWant().Validate(); err != nil {
		t.Fatal(err)
	}
	// K3 returns fresh slices each time.
	a, b := K3(), K3()
	a.FullAttn[0] = 5
	if b.FullAttn[0] != 4 || !reflect.DeepEqual(K3(), b) {
		t.Fatal("K3 shares state between calls")
	}
}

func TestConfigErrorString(t *testing.T) {
	e := &ConfigError{Missing: []string{"a", "b"}, Violations: []string{"c = 1"}}
	if got := e.Error(); got != "config: invalid configuration; missing: a, b; violations: c = 1" {
		t.Errorf("Error() = %q", got)
	}
}

// absurd returns the K3 config with one count replaced, as file bytes.
func absurd(t testing.TB, layers, experts int) []byte {
	// The writer refuses what Validate refuses, so the counts are edited in
	// the text of a valid file.
	data, err := MarshalNested(K3())
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	edit := func(key string, from, to int) {
		old := fmt.Sprintf("%q: %d", key, from)
		if !strings.Contains(s, old) {
			t.Fatalf("the K3 config has no %s", old)
		}
		s = strings.Replace(s, old, fmt.Sprintf("%q: %d", key, to), 1)
	}
	if layers > 0 {
		edit("num_hidden_layers", 93, layers)
	}
	if experts > 0 {
		edit("num_experts", 896, experts)
	}
	return []byte(s)
}

func TestAbsurdCountsRefused(t *testing.T) {
	for _, tc := range []struct {
		name            string
		layers, experts int
		want            string
	}{
		{"2^20 experts", 0, 1 << 20, "num_experts = 1048576 exceeds the library limit 65536"},
		{"2^24 layers", 1 << 24, 0, "num_hidden_layers = 16777216 exceeds the library limit 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The file keeps its (now short) kda_layers: the complement check
			// must not walk 2^24 layers.
			data := absurd(t, tc.layers, tc.experts)
			start := time.Now()
			_, err := Parse(data)
			elapsed := time.Since(start)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v, want a *ConfigError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if !testkit.RaceEnabled && elapsed >= 100*time.Millisecond {
				t.Errorf("refused after %v, want under 100 ms", elapsed)
			}
		})
	}
}

// The acceptance bound: each absurd config is refused in under 100 ms and
// under 50 MB of peak RSS, measured on a fresh process (this test binary
// re-run as a child that only loads the file).
func TestAbsurdCountsPeakRSS(t *testing.T) {
	if path, ok := testkit.ChildArg("K3_CONFIG_CHILD"); ok {
		_, err := Load(path)
		if err == nil {
			fmt.Println("ACCEPTED")
			os.Exit(3)
		}
		fmt.Printf("PEAK %d\n", testkit.PeakRSS())
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	if testkit.RaceEnabled {
		t.Skip("the race runtime's own memory and speed are not the figures measured")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name            string
		layers, experts int
	}{{"experts", 0, 1 << 20}, {"layers", 1 << 24, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(path, absurd(t, tc.layers, tc.experts), 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out := testkit.RunChild(t, "TestAbsurdCountsPeakRSS", "K3_CONFIG_CHILD", path)
			var rss int64
			if _, err := fmt.Sscanf(testkit.ChildLine(t, out, "PEAK "), "PEAK %d", &rss); err != nil {
				t.Fatalf("%v in %s", err, out)
			}
			if rss < 0 {
				t.Skip("no /proc/self/status on this system")
			}
			t.Logf("child: %v wall (process start included), peak RSS %.1f MB", time.Since(start), float64(rss)/1e6)
			if rss >= 50e6 {
				t.Errorf("child peak RSS %d B, want under 50 MB", rss)
			}
		})
	}
}

func TestConfigFileSizeLimit(t *testing.T) {
	// A 157 MB config (a huge layer list) is refused by size, before parsing.
	path := filepath.Join(t.TempDir(), "config.json")
	testkit.SparseFile(t, path, 157e6)
	if _, err := Load(path); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Load of a 157 MB config: %v, want ErrTooLarge", err)
	}
	// Parse applies the same bound to bytes in memory.
	big := make([]byte, MaxFileSize+1)
	if _, err := Parse(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Parse of MaxFileSize+1 bytes: %v, want ErrTooLarge", err)
	}
	// The released config is far below it.
	st, err := os.Stat(filepath.Join("testdata", "k3_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= MaxFileSize/64 {
		t.Errorf("the released config is %d B, want under MaxFileSize/64", st.Size())
	}
}

func TestCheckAgainst(t *testing.T) {
	c := K3()
	// K3: 5 + 93·6 + 24·8 + 69·14 + 1·3 + 92·(4+1+3+896·6) tensors.
	want := int64(5 + 93*6 + 24*8 + 69*14 + 3 + 92*(4+1+3+896*6))
	if got := c.MinTensors(); got != want {
		t.Errorf("MinTensors = %d, want %d", got, want)
	}
	if err := c.CheckAgainst(int(want)); err != nil {
		t.Errorf("CheckAgainst(%d): %v", want, err)
	}
	err := c.CheckAgainst(int(want) - 1)
	if !errors.Is(err, ErrTooFewTensors) {
		t.Fatalf("CheckAgainst(%d): %v, want ErrTooFewTensors", want-1, err)
	}
	if !strings.Contains(err.Error(), strconv.FormatInt(want, 10)) {
		t.Errorf("error %q does not give the count %d", err, want)
	}

	// The largest plausible config over a small checkpoint: refused without
	// allocation, and the count does not overflow.
	c.NumLayers, c.KDALayers, c.NumExperts = MaxLayers, nil, MaxExperts
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAgainst(1000); !errors.Is(err, ErrTooFewTensors) {
		t.Errorf("CheckAgainst(1000) at the largest config: %v, want ErrTooFewTensors", err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = c.MinTensors() }); n != 0 {
		t.Errorf("MinTensors: %v allocations", n)
	}
}

// MinTensors agrees with every fixture checkpoint: the binders need exactly
// these tensors, and the fixture index lists exactly these.
func TestMinTensorsFixtures(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, err := Load(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
			if errors.Is(err, os.ErrNotExist) {
				t.Skip("no index file")
			}
			if err != nil {
				t.Fatal(err)
			}
			var idx struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			if err := json.Unmarshal(raw, &idx); err != nil {
				t.Fatal(err)
			}
			n := 0
			for name := range idx.WeightMap {
				if strings.HasPrefix(name, "language_model.") {
					n++
				}
			}
			if got := c.MinTensors(); got != int64(n) {
				t.Errorf("MinTensors = %d, the index lists %d", got, n)
			}
			if err := c.CheckAgainst(len(idx.WeightMap)); err != nil {
				t.Errorf("CheckAgainst(%d): %v", len(idx.WeightMap), err)
			}
		})
	}
}

// FuzzCheckAgainst: for any config Parse accepts, MinTensors never
// overflows, allocates nothing, and CheckAgainst draws the line exactly at it.
func FuzzCheckAgainst(f *testing.F) {
	data, err := MarshalNested(K3())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, 0)
	f.Add([]byte(tinyNested().render()), 100)
	f.Add([]byte(tinyFlat().with("num_experts", "65536").with("num_hidden_layers", "4096").render()), 1<<20)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		need := c.MinTensors()
		if need < tensorsModel || need > int64(MaxLayers)*(tensorsResidual+tensorsKDA+tensorsMoE+1+tensorsShared+tensorsExpert*MaxExperts)+tensorsModel {
			t.Fatalf("MinTensors = %d out of bounds", need)
		}
		if c.CheckAgainst(int(need)) != nil || c.CheckAgainst(int(need)-1) == nil {
			t.Fatalf("CheckAgainst does not switch at %d", need)
		}
		if err := c.CheckAgainst(n); (err != nil) != (int64(n) < need) || err != nil && !errors.Is(err, ErrTooFewTensors) {
			t.Fatalf("CheckAgainst(%d) with need %d: %v", n, need, err)
		}
	})
}
