package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
)

// absurd returns the K3 config with one count replaced, as file bytes.
func absurd(t testing.TB, layers, experts int) []byte {
	// The writer refuses what Validate refuses, so the counts are edited in
	// the text of a valid file.
	data, err := MarshalNested(K3())
	require.NoError(t, err)
	s := string(data)
	edit := func(key string, from, to int) {
		old := fmt.Sprintf("%q: %d", key, from)
		require.Contains(t, s, old)
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
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), tc.want)
			if !testkit.RaceEnabled {
				assert.Less(t, elapsed, 100*time.Millisecond)
			}
		})
	}
}

// The acceptance bound: each absurd config is refused in under 100 ms and
// under 50 MB of peak RSS, measured on a fresh process (this test binary
// re-run as a child that only loads the file).
func TestAbsurdCountsPeakRSS(t *testing.T) {
	if path := os.Getenv("K3_CONFIG_CHILD"); path != "" {
		_, err := Load(path)
		if err == nil {
			fmt.Println("ACCEPTED")
			os.Exit(3)
		}
		fmt.Printf("PEAK %d\n", peakRSS())
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
			require.NoError(t, os.WriteFile(path, absurd(t, tc.layers, tc.experts), 0o644))
			cmd := exec.Command(os.Args[0], "-test.run=^TestAbsurdCountsPeakRSS$")
			cmd.Env = append(os.Environ(), "K3_CONFIG_CHILD="+path)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			var rss int64
			i := strings.Index(string(out), "PEAK ")
			require.GreaterOrEqual(t, i, 0, "%s", out)
			_, err = fmt.Sscanf(string(out[i:]), "PEAK %d", &rss)
			require.NoError(t, err)
			if rss < 0 {
				t.Skip("no /proc/self/status on this system")
			}
			t.Logf("child: %v wall (process start included), peak RSS %.1f MB", time.Since(start), float64(rss)/1e6)
			assert.Less(t, rss, int64(50e6))
		})
	}
}

func TestConfigFileSizeLimit(t *testing.T) {
	// A 157 MB config (a huge layer list) is refused by size, before parsing.
	path := filepath.Join(t.TempDir(), "config.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(157e6))
	require.NoError(t, f.Close())
	_, err = Load(path)
	assert.ErrorIs(t, err, ErrTooLarge)
	// Parse applies the same bound to bytes in memory.
	big := make([]byte, MaxFileSize+1)
	_, err = Parse(big)
	assert.ErrorIs(t, err, ErrTooLarge)
	// The released config is far below it.
	st, err := os.Stat(filepath.Join("testdata", "k3_config.json"))
	require.NoError(t, err)
	assert.Less(t, st.Size(), int64(MaxFileSize/64))
}

func TestCheckAgainst(t *testing.T) {
	c := K3()
	// K3: 5 + 93·6 + 24·8 + 69·14 + 1·3 + 92·(4+1+3+896·6) tensors.
	want := int64(5 + 93*6 + 24*8 + 69*14 + 3 + 92*(4+1+3+896*6))
	assert.Equal(t, want, c.MinTensors())
	assert.NoError(t, c.CheckAgainst(int(want)))
	err := c.CheckAgainst(int(want) - 1)
	assert.ErrorIs(t, err, ErrTooFewTensors)
	assert.Contains(t, err.Error(), strconv.FormatInt(want, 10))

	// The largest plausible config over a small checkpoint: refused without
	// allocation, and the count does not overflow.
	c.NumLayers, c.KDALayers, c.NumExperts = MaxLayers, nil, MaxExperts
	require.NoError(t, c.Validate())
	assert.ErrorIs(t, c.CheckAgainst(1000), ErrTooFewTensors)
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = c.MinTensors() }))
}

// MinTensors agrees with every fixture checkpoint: the binders need exactly
// these tensors, and the fixture index lists exactly these.
func TestMinTensorsFixtures(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, err := Load(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
			if errors.Is(err, os.ErrNotExist) {
				t.Skip("no index file")
			}
			require.NoError(t, err)
			var idx struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			require.NoError(t, json.Unmarshal(raw, &idx))
			n := 0
			for name := range idx.WeightMap {
				if strings.HasPrefix(name, "language_model.") {
					n++
				}
			}
			assert.Equal(t, int64(n), c.MinTensors())
			assert.NoError(t, c.CheckAgainst(len(idx.WeightMap)))
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

// peakRSS returns this process's peak resident set (VmHWM) in bytes, or
// −1. The child reads it itself: a parent's rusage of a vfork'd child also
// counts the parent's pages from before the exec.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}
