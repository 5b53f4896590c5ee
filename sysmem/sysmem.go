// Package sysmem tells how much memory this process may use: the kernel's
// MemAvailable and MemTotal, lowered by the tightest memory limit of the
// cgroups (v2 memory.max or v1 memory.limit_in_bytes) the process runs in;
// and how much it has used (PeakRSS, RSSFile).
//
// Start with Read; ReadFS reads the same files from another file system
// (a container's, or a test's).
package sysmem

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
)

// Info is the memory this process may use. Sizes are in bytes.
type Info struct {
	// Available and Total are /proc/meminfo's MemAvailable and MemTotal.
	Available, Total int64
	// Limit is the tightest cgroup memory limit on the way from the
	// process's cgroup to the root, 0 when none applies.
	Limit int64
	// Used is the limited cgroup's current use less its inactive file
	// pages, which the kernel reclaims before it would hit the limit.
	Used int64
	// Cgroup is the path of the cgroup whose limit applies.
	Cgroup string
}

// Usable is Available, lowered to the room left under the cgroup limit.
func (m Info) Usable() int64 {
	if m.Limit > 0 {
		return min(m.Available, max(m.Limit-m.Used, 0))
	}
	return m.Available
}

// Ceiling is Total, lowered to the cgroup limit.
func (m Info) Ceiling() int64 {
	if m.Limit > 0 {
		return min(m.Total, m.Limit)
	}
	return m.Total
}

// String names the figures Usable and Ceiling come from, in decimal GB.
func (m Info) String() string {
	s := fmt.Sprintf("MemAvailable %.2f GB of %.2f GB", float64(m.Available)/1e9, float64(m.Total)/1e9)
	if m.Limit > 0 {
		s += fmt.Sprintf(", cgroup %s memory limit %.2f GB with %.2f GB in use", m.Cgroup, float64(m.Limit)/1e9, float64(m.Used)/1e9)
	}
	return s
}

// Read reads this machine's /proc and /sys/fs/cgroup.
func Read() (Info, error) { return ReadFS(os.DirFS("/")) }

// ReadFS reads proc/meminfo, proc/self/cgroup and the cgroup files under
// sys/fs/cgroup of fsys (paths relative to its root). A missing cgroup file
// means no limit; a malformed one is an error, never guessed around.
func ReadFS(fsys fs.FS) (Info, error) {
	var m Info
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return m, fmt.Errorf("sysmem: %w", err)
	}
	if m.Total, err = meminfoField(b, "MemTotal"); err == nil {
		m.Available, err = meminfoField(b, "MemAvailable")
	}
	if err != nil {
		return m, err
	}
	b, err = fs.ReadFile(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("sysmem: %w", err)
	}
	for _, h := range hierarchies(b) {
		if err := h.tighten(fsys, &m); err != nil {
			return m, err
		}
	}
	return m, nil
}

// meminfoField returns a "Name:   123 kB" line's value in bytes. Lines are
// split by hand rather than by a bufio.Scanner, whose 64 KiB line limit would
// end the search early and report a present field as missing.
func meminfoField(b []byte, name string) (int64, error) {
	for raw := range bytes.Lines(b) {
		line := strings.TrimSuffix(string(raw), "\n")
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("sysmem: meminfo: %s: malformed line %q", name, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/1024 { // the byte count must fit an int64
			return 0, fmt.Errorf("sysmem: meminfo: %s: malformed value %q", name, f[0])
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("sysmem: meminfo: no %s line", name)
}
