package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/k3-project/k3/internal/fileio/regular"
)

// Problem is one failed check of CheckDir.
type Problem struct {
	File string // the file's name in the directory
	Msg  string
}

func (p Problem) String() string { return p.File + ": " + p.Msg }

// CheckDir checks the shards of a checkpoint directory without reading
// tensor data, and reports every problem, not the first: each shard the
// index names exists, its header is valid, its size is the one the header
// describes, it holds the tensors the index places in it, and the index's
// total_size is the sum of the shards' tensor bytes. Without an index, every
// *.safetensors file of dir is checked. sizes has the file size of each
// shard that passed, by name; err is a failure to read the directory or the
// index itself.
func CheckDir(dir string) (sizes map[string]int64, problems []Problem, err error) {
	byShard := map[string][]string{} // shard -> tensors the index places there
	var names []string
	totalSize := int64(-1)
	b, err := regular.ReadFile(filepath.Join(dir, IndexFileName), MaxIndexSize)
	switch {
	case err == nil:
		wm, ts, err := ParseIndex(b)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: %s: %w", filepath.Join(dir, IndexFileName), err)
		}
		totalSize = ts
		for t, s := range wm {
			byShard[s] = append(byShard[s], t)
		}
		for s := range byShard {
			names = append(names, s)
		}
	case errors.Is(err, os.ErrNotExist):
		m, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
		if err != nil {
			return nil, nil, err
		}
		if len(m) == 0 {
			return nil, nil, fmt.Errorf("safetensors: %s: no %s and no *.safetensors file", dir, IndexFileName)
		}
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	default:
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	slices.Sort(names)
	sizes = map[string]int64{}
	var tensorBytes int64
	for _, name := range names {
		size, sum, msg := checkShard(filepath.Join(dir, name), byShard[name])
		if msg != "" {
			problems = append(problems, Problem{name, msg})
			continue
		}
		sizes[name] = size
		tensorBytes += sum
	}
	if totalSize >= 0 && len(problems) == 0 && tensorBytes != totalSize {
		problems = append(problems, Problem{IndexFileName, fmt.Sprintf("total_size %d, the shards hold %d tensor bytes", totalSize, tensorBytes)})
	}
	return sizes, problems, nil
}

// checkShard validates one shard's header and size and that it holds the listed tensors. It
// returns the file size, the sum of its tensors' bytes, or a message describing the problem.
func checkShard(path string, listed []string) (size, tensorBytes int64, msg string) {
	// Opened without blocking and refused unless a regular file: a FIFO in a shard's place
	// would block open(2) for ever.
	f, size, err := regular.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, "missing (the index names it)"
	}
	if err != nil {
		return 0, 0, err.Error()
	}
	defer f.Close()
	h, err := ReadHeader(path, f)
	if err != nil {
		if errors.Is(err, ErrDataBeyondFile) {
			if want, ok := describedSize(f); ok {
				return 0, 0, fmt.Sprintf("truncated: %d bytes, its header describes %d", size, want)
			}
		}
		if errors.Is(err, ErrTrailingBytes) {
			if want, ok := describedSize(f); ok {
				return 0, 0, fmt.Sprintf("changed: %d bytes, its header describes %d", size, want)
			}
		}
		return 0, 0, err.Error()
	}
	have := make(map[string]bool, len(h.Tensors))
	for _, t := range h.Tensors {
		have[t.Name] = true
		tensorBytes += t.Size
	}
	if want := h.DataOffset + tensorBytes; want != size {
		return 0, 0, fmt.Sprintf("changed: %d bytes, its header describes %d", size, want)
	}
	var absent []string
	for _, t := range listed {
		if !have[t] {
			absent = append(absent, t)
		}
	}
	if len(absent) > 0 {
		slices.Sort(absent)
		return 0, 0, fmt.Sprintf("lacks %d tensor(s) the index places in it, the first %s", len(absent), absent[0])
	}
	return size, tensorBytes, ""
}

// describedSize is the file size a header describes (8 + header length + the largest data end),
// read leniently for the message about a truncated file; ok is false when it cannot be told.
func describedSize(f *os.File) (int64, bool) {
	var pre [8]byte
	if _, err := f.ReadAt(pre[:], 0); err != nil {
		return 0, false
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > MaxHeaderSize {
		return 0, false
	}
	hdr := make([]byte, n)
	if _, err := f.ReadAt(hdr, 8); err != nil {
		return 0, false
	}
	var entries map[string]json.RawMessage
	if json.Unmarshal(hdr, &entries) != nil {
		return 0, false
	}
	var end int64
	for k, v := range entries {
		var e struct {
			Offsets []int64 `json:"data_offsets"`
		}
		if k == "__metadata__" || json.Unmarshal(v, &e) != nil || len(e.Offsets) != 2 {
			continue
		}
		end = max(end, e.Offsets[1])
	}
	return 8 + int64(n) + end, true
}
