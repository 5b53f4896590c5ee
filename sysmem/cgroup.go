package sysmem

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// hierarchy is one cgroup hierarchy that can hold a memory limit, with the
// names its version gives to the limit, the use and the reclaimable pages.
type hierarchy struct {
	root               string // mount point, relative to the file system's root
	cgroup             string // the process's cgroup in it, "/" for the root
	limit, used, stat  string
	inactive           string // memory.stat key of the inactive file pages
	unlimitedFromBytes int64  // a limit at least this large means none
}

// v1Unlimited: cgroup v1 writes "no limit" as the largest page-aligned
// int64 (9223372036854771712); no real limit comes near 2^62 bytes.
const v1Unlimited = 1 << 62

// hierarchies lists, from /proc/self/cgroup, the unified (v2) hierarchy and
// the v1 hierarchy of the memory controller, those present.
func hierarchies(procCgroup []byte) []hierarchy {
	var hs []hierarchy
	for _, line := range strings.Split(string(procCgroup), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		p = path.Clean(p)
		switch {
		case id == "0" && ctrls == "":
			hs = append(hs, hierarchy{root: "sys/fs/cgroup", cgroup: p,
				limit: "memory.max", used: "memory.current", stat: "memory.stat", inactive: "inactive_file"})
		case hasController(ctrls, "memory"):
			hs = append(hs, hierarchy{root: "sys/fs/cgroup/memory", cgroup: p,
				limit: "memory.limit_in_bytes", used: "memory.usage_in_bytes", stat: "memory.stat", inactive: "total_inactive_file",
				unlimitedFromBytes: v1Unlimited})
		}
	}
	return hs
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// tighten lowers m's limit to the tightest one on the path from h's cgroup
// up to the root. The walk goes up because a limit set on a parent bounds
// its children, and because without a cgroup namespace a container sees
// its own cgroup mounted as the root while /proc names the host's path.
func (h hierarchy) tighten(fsys fs.FS, m *Info) error {
	for p := h.cgroup; ; p = path.Dir(p) {
		dir := path.Join(h.root, p)
		lim, err := h.readLimit(fsys, dir)
		if err != nil {
			return err
		}
		if lim > 0 && (m.Limit == 0 || lim < m.Limit) {
			used, err := h.readUsed(fsys, dir)
			if err != nil {
				return err
			}
			m.Limit, m.Used, m.Cgroup = lim, used, p
		}
		if p == "/" {
			return nil
		}
	}
}

// readLimit returns the limit of dir, 0 for none ("max", absent, or v1's
// unlimited value).
func (h hierarchy) readLimit(fsys fs.FS, dir string) (int64, error) {
	file := path.Join(dir, h.limit)
	b, err := fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("sysmem: %s: malformed limit %q", file, s)
	}
	if h.unlimitedFromBytes > 0 && n >= h.unlimitedFromBytes {
		return 0, nil
	}
	return n, nil
}

// readUsed is dir's current use less its inactive file pages.
func (h hierarchy) readUsed(fsys fs.FS, dir string) (int64, error) {
	file := path.Join(dir, h.used)
	b, err := fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || cur < 0 {
		return 0, fmt.Errorf("sysmem: %s: malformed value %q", file, strings.TrimSpace(string(b)))
	}
	file = path.Join(dir, h.stat)
	b, err = fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return cur, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, h.inactive+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("sysmem: %s: malformed %s %q", file, h.inactive, v)
			}
			return max(cur-n, 0), nil
		}
	}
	return cur, nil
}
