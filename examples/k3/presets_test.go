package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetBudgets(t *testing.T) {
	noMem := func() (memInfo, error) { return memInfo{}, errors.New("not asked") }
	for name, want := range map[string][2]float64{
		"laptop": {3, 1}, "desktop": {16, 10}, "workstation": {60, 30}, "server": {110, 13}, "max": {110, 109},
	} {
		tr, ca, floor, err := presetBudget(name, noMem)
		require.NoError(t, err, name)
		assert.False(t, floor)
		assert.Equal(t, int64(want[0]*1e9), tr, name)
		assert.Equal(t, int64(want[1]*1e9), ca, name)
	}
	_, _, floor, err := presetBudget("floor", noMem)
	require.NoError(t, err)
	assert.True(t, floor)
	_, _, _, err = presetBudget("ultra", noMem)
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "--preset", ue.flag)
	_, _, _, err = presetBudget("auto", noMem)
	assert.ErrorContains(t, err, "not asked")
}

// TestAutoBudget checks the SPEC §11.1 rule at its three regimes.
func TestAutoBudget(t *testing.T) {
	g := func(x float64) int64 { return int64(x * 1e9) }
	// 24 GB available of 25: reserve 2 + 0.48 + 4.7 + 1.7 = 8.88, usable 15.12; the trunk is
	// capped at 0.55·25 − 8.88 − 0.5 = 4.37 GB, the cache gets 0.5.
	tr, ca, err := autoBudget(memInfo{memAvailable: g(24), memTotal: g(25)})
	require.NoError(t, err)
	assert.InDelta(t, 4.37e9, float64(tr), 1e3)
	assert.Equal(t, g(0.5), ca)
	// 228 GB: usable 228 − 12.96 = 215.04 ≥ 111.5 → trunk 111, cache 104.04.
	tr, ca, err = autoBudget(memInfo{memAvailable: g(228), memTotal: g(240)})
	require.NoError(t, err)
	assert.Equal(t, g(111), tr)
	assert.InDelta(t, 104.04e9, float64(ca), 1e3)
	// A cgroup limit of 12 GB with 1 GB in use on a 64 GB machine: avail 11, usable 11 − 9.62
	// = 1.38 < 3 → refused, naming the cgroup.
	_, _, err = autoBudget(memInfo{memAvailable: g(60), memTotal: g(64), cgLimit: g(12), cgUsed: g(1), cgPath: "/box"})
	var be *budgetError
	require.ErrorAs(t, err, &be)
	assert.Contains(t, be.Error(), "cgroup /box memory.max 12.00 GB")
	assert.Contains(t, be.Error(), "at least 3.0 GB")
	// The cgroup lowers both the available memory and the ceiling: limit 40, 2 in use.
	tr, _, err = autoBudget(memInfo{memAvailable: g(100), memTotal: g(128), cgLimit: g(40), cgUsed: g(2)})
	require.NoError(t, err)
	res := 2 + 0.02*38 + 4.7 + 1.7
	assert.InDelta(t, (0.55*40-res-0.5)*1e9, float64(tr), 1e3)
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
	}
}

const fakeMeminfo = "MemTotal:       65536000 kB\nMemFree:         1000 kB\nMemAvailable:   50000000 kB\n"

// TestReadMemInfo: MemAvailable and MemTotal in bytes; the tightest cgroup v2 memory.max on the
// way to the root applies, with its reclaimable page cache not counted as used.
func TestReadMemInfo(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"proc/meminfo":                       fakeMeminfo,
		"proc/self/cgroup":                   "0::/user.slice/job\n",
		"cg/memory.max":                      "max\n",
		"cg/user.slice/memory.max":           "20000000000\n",
		"cg/user.slice/memory.current":       "5000000000\n",
		"cg/user.slice/memory.stat":          "anon 1\ninactive_file 1000000000\nactive_file 3\n",
		"cg/user.slice/job/memory.max":       "max\n",
		"cg/user.slice/job/memory.current":   "1\n",
		"cg/user.slice/other/memory.max":     "1\n",
		"cg/user.slice/other/memory.current": "1\n",
	})
	m, err := readMemInfoAt(filepath.Join(root, "proc"), filepath.Join(root, "cg"))
	require.NoError(t, err)
	assert.Equal(t, int64(65536000*1024), m.memTotal)
	assert.Equal(t, int64(50000000*1024), m.memAvailable)
	assert.Equal(t, int64(20e9), m.cgLimit)
	assert.Equal(t, "/user.slice", m.cgPath)
	assert.Equal(t, int64(4e9), m.cgUsed)
	assert.Equal(t, int64(16e9), m.usable())
	assert.Equal(t, int64(20e9), m.ceiling())

	// No cgroup v2 line (v1 only): MemAvailable alone.
	writeFiles(t, root, map[string]string{"proc/self/cgroup": "4:memory:/x\n"})
	m, err = readMemInfoAt(filepath.Join(root, "proc"), filepath.Join(root, "cg"))
	require.NoError(t, err)
	assert.Zero(t, m.cgLimit)
	assert.Equal(t, m.memAvailable, m.usable())

	// Malformed files are errors, not guesses.
	for name, files := range map[string]map[string]string{
		"meminfo unit":  {"proc/meminfo": "MemTotal: 5 MB\nMemAvailable: 1 kB\n"},
		"no avail":      {"proc/meminfo": "MemTotal: 5 kB\n"},
		"limit":         {"proc/meminfo": fakeMeminfo, "proc/self/cgroup": "0::/\n", "cg/memory.max": "lots\n"},
		"current":       {"proc/meminfo": fakeMeminfo, "proc/self/cgroup": "0::/\n", "cg/memory.max": "10\n", "cg/memory.current": "-1\n"},
		"inactive_file": {"proc/meminfo": fakeMeminfo, "proc/self/cgroup": "0::/\n", "cg/memory.max": "10\n", "cg/memory.current": "5\n", "cg/memory.stat": "inactive_file x\n"},
	} {
		r := t.TempDir()
		writeFiles(t, r, files)
		_, err := readMemInfoAt(filepath.Join(r, "proc"), filepath.Join(r, "cg"))
		assert.Error(t, err, name)
	}
}

// FuzzMeminfoField: the meminfo parser never panics and returns only non-negative kB multiples.
func FuzzMeminfoField(f *testing.F) {
	f.Add([]byte(fakeMeminfo))
	f.Add([]byte("MemAvailable: 18446744073709551615 kB\n"))
	f.Add([]byte("MemAvailable:\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := meminfoField(b, "MemAvailable")
		if err == nil && (v < 0 || v%1024 != 0) {
			t.Fatalf("%q: %d", b, v)
		}
	})
}

// FuzzParseManifest: the manifest parser never panics; accepted entries are plain names with
// 64-hex-digit digests, and re-serialising them parses to the same map.
func FuzzParseManifest(f *testing.F) {
	good := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef  model-00001-of-00002.safetensors\n"
	for _, s := range []string{good, good + good, "x  y\n", good[:64] + " *a\n", good[:64] + "  ../a\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest("m", b)
		if err != nil {
			return
		}
		var again []byte
		for name, sum := range m {
			if len(sum) != 64 || name == "" || filepath.Base(name) != name {
				t.Fatalf("accepted %q: %q", name, sum)
			}
			again = append(again, sum+"  "+name+"\n"...)
		}
		m2, err := parseManifest("m", again)
		if err != nil || len(m2) != len(m) {
			t.Fatalf("re-serialised manifest: %v, %d vs %d entries", err, len(m2), len(m))
		}
	})
}

func TestParseManifest(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	m, err := parseManifest("m", []byte(sum+"  a.safetensors\n"+sum+" *config.json\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a.safetensors": sum, "config.json": sum}, m)
	for i, bad := range []string{
		"", sum + " a\n", sum + "  a/b\n", sum + "  ..\n", "0X" + sum[2:] + "  a\n",
		sum + "  a\n" + sum + "  a\n", sum[:63] + "  a\n", "ABCDEF" + sum[6:] + "  a\n",
	} {
		_, err := parseManifest("m", []byte(bad))
		assert.Error(t, err, strconv.Itoa(i))
	}
}

// TestMeminfoFieldOverflow: a value whose byte count does not fit an int64 is refused (the
// fuzzer found 2^53 kB wrapping to −2^63).
func TestMeminfoFieldOverflow(t *testing.T) {
	v, err := meminfoField([]byte("MemAvailable: 9007199254740991 kB\n"), "MemAvailable")
	if err != nil || v != 9007199254740991*1024 {
		t.Fatalf("2^53−1 kB: %d, %v", v, err)
	}
	if v, err := meminfoField([]byte("MemAvailable: 9007199254740992 kB\n"), "MemAvailable"); err == nil {
		t.Fatalf("2^53 kB accepted as %d", v)
	}
}
