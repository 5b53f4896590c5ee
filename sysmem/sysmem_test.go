package sysmem

import (
	"math/big"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fakeMeminfo = "MemTotal:       65536000 kB\nMemFree:         1000 kB\nMemAvailable:   50000000 kB\n"

func read(t *testing.T, tree string) Info {
	t.Helper()
	m, err := ReadFS(os.DirFS("testdata/" + tree))
	require.NoError(t, err)
	assert.Equal(t, int64(65536000*1024), m.Total)
	assert.Equal(t, int64(50000000*1024), m.Available)
	return m
}

// TestCgroups reads the limit of each hierarchy:
//   - v2: the tightest memory.max on the way to the root applies, with its
//     reclaimable page cache not counted as used;
//   - v1: in a container /proc names the host's path, which the mount lacks;
//     the walk up finds the limit at the mount's root, and
//     total_inactive_file (the hierarchical count) is the reclaimable part;
//   - hybrid: with both hierarchies, the tighter limit wins.
func TestCgroups(t *testing.T) {
	for _, tc := range []struct {
		tree, cgroup                 string
		limit, used, usable, ceiling int64
	}{
		{"v2", "/user.slice", 20e9, 4e9, 16e9, 20e9},
		{"v1", "/", 8e9, 2.5e9, 5.5e9, 8e9},
		{"hybrid", "/box", 6e9, 1e9, 5e9, 6e9},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			m := read(t, tc.tree)
			assert.Equal(t, tc.limit, m.Limit, "Limit")
			assert.Equal(t, tc.cgroup, m.Cgroup, "Cgroup")
			assert.Equal(t, tc.used, m.Used, "Used")
			assert.Equal(t, tc.usable, m.Usable(), "Usable")
			assert.Equal(t, tc.ceiling, m.Ceiling(), "Ceiling")
		})
	}
	m := read(t, "v2")
	assert.Contains(t, m.String(), "cgroup /user.slice memory limit 20.00 GB with 4.00 GB in use")
}

// TestNoLimit: without a cgroup, or with v1's unlimited value, MemAvailable
// is what is usable.
func TestNoLimit(t *testing.T) {
	m := read(t, "v1-unlimited")
	assert.Zero(t, m.Limit, "v1's unlimited value is no limit")
	assert.Equal(t, m.Available, m.Usable())
	assert.Equal(t, m.Total, m.Ceiling())

	m = read(t, "bare")
	assert.Zero(t, m.Limit)
	assert.Equal(t, m.Available, m.Usable())
	assert.Equal(t, "MemAvailable 51.20 GB of 67.11 GB", m.String())
}

// TestMalformed: malformed files are errors, not guesses.
func TestMalformed(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	v2 := func(extra map[string]string) fstest.MapFS {
		fsys := fstest.MapFS{"proc/meminfo": file(fakeMeminfo), "proc/self/cgroup": file("0::/\n")}
		for k, v := range extra {
			fsys[k] = file(v)
		}
		return fsys
	}
	for name, fsys := range map[string]fstest.MapFS{
		"no meminfo":    {},
		"meminfo unit":  {"proc/meminfo": file("MemTotal: 5 MB\nMemAvailable: 1 kB\n")},
		"no avail":      {"proc/meminfo": file("MemTotal: 5 kB\n")},
		"limit":         v2(map[string]string{"sys/fs/cgroup/memory.max": "lots\n"}),
		"zero limit":    v2(map[string]string{"sys/fs/cgroup/memory.max": "0\n"}),
		"current":       v2(map[string]string{"sys/fs/cgroup/memory.max": "10\n", "sys/fs/cgroup/memory.current": "-1\n"}),
		"inactive_file": v2(map[string]string{"sys/fs/cgroup/memory.max": "10\n", "sys/fs/cgroup/memory.current": "5\n", "sys/fs/cgroup/memory.stat": "inactive_file x\n"}),
		"v1 limit": {"proc/meminfo": file(fakeMeminfo), "proc/self/cgroup": file("3:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("-5\n")},
	} {
		_, err := ReadFS(fsys)
		assert.Error(t, err, name)
	}
}

func TestRead(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo here")
	}
	m, err := Read()
	require.NoError(t, err)
	assert.Positive(t, m.Usable())
	assert.LessOrEqual(t, m.Usable(), m.Ceiling())
}

// TestMeminfoFieldOverflow: a value whose byte count does not fit an int64
// is refused (the fuzzer found 2^53 kB wrapping to −2^63).
func TestMeminfoFieldOverflow(t *testing.T) {
	v, err := meminfoField([]byte("MemAvailable: 9007199254740991 kB\n"), "MemAvailable")
	require.NoError(t, err)
	assert.Equal(t, int64(9007199254740991*1024), v)
	_, err = meminfoField([]byte("MemAvailable: 9007199254740992 kB\n"), "MemAvailable")
	assert.Error(t, err)
}

// TestMeminfoFieldLongLine: a line longer than a bufio.Scanner's 64 KiB
// before the field does not hide it.
func TestMeminfoFieldLongLine(t *testing.T) {
	b := []byte("Junk: " + strings.Repeat("x", 100<<10) + "\n" + fakeMeminfo)
	v, err := meminfoField(b, "MemAvailable")
	require.NoError(t, err)
	assert.Equal(t, int64(50000000*1024), v)
}

// FuzzMeminfoField: the meminfo parser never panics and agrees with a
// reference written another way (whole-text split, arbitrary-precision value):
// the first line named MemAvailable decides, and its value is taken in bytes
// only when it is a non-negative kB count whose byte count fits an int64.
func FuzzMeminfoField(f *testing.F) {
	f.Add([]byte(fakeMeminfo))
	f.Add([]byte("MemAvailable: 18446744073709551615 kB\n"))
	f.Add([]byte("MemAvailable:\n"))
	f.Add([]byte("MemAvailable: 7 kB\r\nMemAvailable: 8 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := meminfoField(b, "MemAvailable")
		want, ok := referenceMeminfoField(string(b), "MemAvailable")
		require.Equal(t, ok, err == nil, "%q: %v", b, err)
		if ok {
			require.Equal(t, want, v, "%q", b)
		}
	})
}

func referenceMeminfoField(text, name string) (int64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, found := strings.CutPrefix(line, name+":")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		n, ok := new(big.Int).SetString(f[0], 10)
		if !ok || n.Sign() < 0 {
			return 0, false
		}
		n.Mul(n, big.NewInt(1024))
		if !n.IsInt64() {
			return 0, false
		}
		return n.Int64(), true
	}
	return 0, false
}

// FuzzHierarchies: any /proc/self/cgroup text yields valid fs paths.
func FuzzHierarchies(f *testing.F) {
	f.Add([]byte("12:pids:/docker/abc\n4:memory:/docker/abc\n0::/a/../b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, h := range hierarchies(b) {
			_, err := ReadFS(fstest.MapFS{"proc/meminfo": {Data: []byte(fakeMeminfo)}, "proc/self/cgroup": {Data: b}})
			require.NoError(t, err, "%q (%+v)", b, h)
		}
	})
}

// TestRSSFile: RssFile is read from the status file's kB line.
func TestRSSFile(t *testing.T) {
	status := "Name:\tk3\nVmRSS:\t  9000 kB\nRssAnon:\t  1000 kB\nRssFile:\t  8000 kB\n"
	n, err := rssFile(fstest.MapFS{"proc/self/status": {Data: []byte(status)}})
	require.NoError(t, err)
	assert.Equal(t, int64(8000*1024), n)
	_, err = rssFile(fstest.MapFS{"proc/self/status": {Data: []byte("VmRSS: 1 kB\n")}})
	assert.Error(t, err)
}

// TestUsage: on Linux the process has a peak RSS and, running from a
// mapped binary, file-backed resident pages.
func TestUsage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	before := PeakRSS()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	assert.GreaterOrEqual(t, PeakRSS(), int64(64<<20), "a touched 64 MiB buffer counts")
	assert.GreaterOrEqual(t, PeakRSS(), before)
	assert.Positive(t, RSSFile())
	runtime.KeepAlive(buf)
}
