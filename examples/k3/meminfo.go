package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// memInfo is the memory this process may use: the kernel's MemAvailable and MemTotal and, when
// the process runs in a cgroup v2 with a memory.max limit (a container, a systemd slice), the
// tightest such limit on the way to the root and that cgroup's current use.
type memInfo struct {
	memAvailable, memTotal int64
	cgLimit                int64  // bytes; 0 when no limit applies
	cgUsed                 int64  // memory.current minus inactive_file (reclaimable page cache)
	cgPath                 string // the cgroup whose limit applies
}

// usable is MemAvailable, lowered to the room left under the cgroup limit.
func (m memInfo) usable() int64 {
	if m.cgLimit > 0 {
		return min(m.memAvailable, max(m.cgLimit-m.cgUsed, 0))
	}
	return m.memAvailable
}

// ceiling is MemTotal, lowered to the cgroup limit.
func (m memInfo) ceiling() int64 {
	if m.cgLimit > 0 {
		return min(m.memTotal, m.cgLimit)
	}
	return m.memTotal
}

func (m memInfo) source() string {
	s := fmt.Sprintf("MemAvailable %.2f GB of %.2f GB", float64(m.memAvailable)/gb, float64(m.memTotal)/gb)
	if m.cgLimit > 0 {
		s += fmt.Sprintf(", cgroup %s memory.max %.2f GB with %.2f GB in use", m.cgPath, float64(m.cgLimit)/gb, float64(m.cgUsed)/gb)
	}
	return s
}

func readMemInfo() (memInfo, error) { return readMemInfoAt("/proc", "/sys/fs/cgroup") }

// readMemInfoAt reads proc/meminfo, proc/self/cgroup and the cgroup v2 files under cgRoot (the
// roots are parameters so tests can use a fake tree). A missing cgroup v2 hierarchy means no
// limit; malformed files are errors, never guessed around.
func readMemInfoAt(proc, cgRoot string) (memInfo, error) {
	var m memInfo
	b, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return m, err
	}
	if m.memTotal, err = meminfoField(b, "MemTotal"); err == nil {
		m.memAvailable, err = meminfoField(b, "MemAvailable")
	}
	if err != nil {
		return m, err
	}
	b, err = os.ReadFile(filepath.Join(proc, "self", "cgroup"))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	rel, ok := cgroupV2Path(b)
	if !ok {
		return m, nil // cgroup v1 only: no memory.max to honour
	}
	// The tightest limit on the path from the process's cgroup up to the root applies.
	for p := rel; ; p = path.Dir(p) {
		dir := filepath.Join(cgRoot, filepath.FromSlash(p))
		lim, err := readCgroupLimit(filepath.Join(dir, "memory.max"))
		if err != nil {
			return m, err
		}
		if lim > 0 && (m.cgLimit == 0 || lim < m.cgLimit) {
			used, err := cgroupUsed(dir)
			if err != nil {
				return m, err
			}
			m.cgLimit, m.cgUsed, m.cgPath = lim, used, p
		}
		if p == "/" {
			break
		}
	}
	return m, nil
}

// meminfoField returns a "Name:   123 kB" line's value in bytes.
func meminfoField(b []byte, name string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: %s: malformed line %q", name, sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/1024 { // the byte count must fit an int64
			return 0, fmt.Errorf("meminfo: %s: malformed value %q", name, f[0])
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("meminfo: no %s line", name)
}

// cgroupV2Path returns the path of the "0::/path" line of /proc/self/cgroup.
func cgroupV2Path(b []byte) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return path.Clean(p), true
		}
	}
	return "", false
}

// readCgroupLimit reads memory.max: "max" or absent (the root) is no limit (0).
func readCgroupLimit(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: malformed limit %q", file, s)
	}
	return n, nil
}

// cgroupUsed is memory.current minus memory.stat's inactive_file (page cache the kernel reclaims
// before it would hit the limit).
func cgroupUsed(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || cur < 0 {
		return 0, fmt.Errorf("%s/memory.current: malformed value %q", dir, strings.TrimSpace(string(b)))
	}
	b, err = os.ReadFile(filepath.Join(dir, "memory.stat"))
	if errors.Is(err, os.ErrNotExist) {
		return cur, nil
	}
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "inactive_file "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%s/memory.stat: malformed inactive_file %q", dir, v)
			}
			return max(cur-n, 0), nil
		}
	}
	return cur, nil
}
