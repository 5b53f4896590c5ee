package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
)

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
