package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/safetensors"
)

var verifyCmd = command{name: "verify", flags: flagSpec{"--manifest": true, "--write-manifest": true}, help: `usage: k3 verify <model_dir> [--manifest FILE | --write-manifest FILE]

Checks a checkpoint's files without loading the model: every shard the index names exists, its
safetensors header is valid, its size is what the header describes, it holds the tensors the
index places in it, and the index's total_size matches. Without an index, every *.safetensors
file of the directory is checked.

  --manifest FILE        also compare the sha256 of config.json, the index, the tokenizer files
                         (when present) and every shard with
                         FILE (sha256sum format: "<hex>  <name>" per line; sha256sum -c reads it)
  --write-manifest FILE  write such a manifest for the files as they are ("-" for stdout)
  -h, --help             this help

Progress goes to stderr (a bar on a terminal). Every problem is reported, one line naming the
file; the exit code is 0 when all checks pass, 1 when any fails, 2 for usage errors (including
an unreadable or malformed manifest).
`}

const indexFile = "model.safetensors.index.json"

// verifyProblem is one failed check, naming the file.
type verifyProblem struct{ file, msg string }

func cmdVerify(argv []string, stdout, stderr io.Writer) int {
	a, code, ok := verifyCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	var err error
	switch {
	case len(a.pos) != 1:
		err = usagef("", "expected exactly one model directory, got %d positional arguments", len(a.pos))
	case a.has("--manifest") && a.has("--write-manifest"):
		err = usagef("--write-manifest", "conflicts with --manifest")
	case a.has("--manifest") && a.vals["--manifest"] == "":
		err = usagef("--manifest", "empty path")
	case a.has("--write-manifest") && a.vals["--write-manifest"] == "":
		err = usagef("--write-manifest", "empty path")
	}
	var want *k3.Manifest
	if err == nil && a.has("--manifest") {
		want, err = readManifest(a.vals["--manifest"])
	}
	out := a.vals["--write-manifest"]
	if err == nil && out != "" && out != "-" {
		if perr := probeWritable(out); perr != nil {
			err = usagef("--write-manifest", "%v", perr)
		}
	}
	if err != nil {
		return verifyCmd.usageFail(stderr, err)
	}
	dir := a.pos[0]
	shards, problems, err := checkShards(dir)
	if err != nil {
		fail(stderr, fmt.Errorf("verify: %w", err))
		return exitRuntime
	}
	var total int64
	for _, s := range shards {
		total += s.size
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "k3 verify: %s: %s\n", p.file, p.msg)
	}
	n := len(problems)
	// Digests are computed only for a checkpoint whose structure holds: a broken one is named
	// above, file by file, without reading all of its bytes.
	if n == 0 && (want != nil || out != "") {
		progress := hashProgress(stderr, dir)
		if want != nil {
			var me *k3.ManifestError
			if err := k3.VerifyManifest(dir, want, progress.report); errors.As(err, &me) {
				for _, p := range me.Problems {
					fmt.Fprintf(stderr, "k3 verify: %s\n", p)
				}
				n += len(me.Problems)
			} else if err != nil {
				fail(stderr, err)
				n++
			}
		} else if err := writeManifest(dir, out, stdout, progress.report); err != nil {
			fail(stderr, err)
			n++
		}
		progress.finish()
	}
	if n > 0 {
		fmt.Fprintf(stderr, "k3 verify: %s: %d problem(s)\n", dir, n)
		return exitRuntime
	}
	what := "sizes match the index"
	if want != nil {
		what += ", sha256 digests match " + a.vals["--manifest"]
	}
	fmt.Fprintf(stderr, "k3 verify: %s: %d shard(s), %.3f GB: %s\n", dir, len(shards), float64(total)/1e9, what)
	return exitOK
}

// readManifest reads --manifest; an unreadable or malformed file is a usage error.
func readManifest(path string) (*k3.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--manifest", "%v", err)
	}
	defer f.Close()
	m, err := k3.ReadManifest(f)
	if err != nil {
		return nil, usagef("--manifest", "%s: %v", path, err)
	}
	return m, nil
}

// writeManifest writes the manifest of dir to path ("-": stdout).
func writeManifest(dir, path string, stdout io.Writer, progress k3.Progress) error {
	m, err := k3.BuildManifest(dir, progress)
	if err != nil {
		return err
	}
	if path == "-" {
		_, err = stdout.Write(m.Marshal())
		return err
	}
	return os.WriteFile(path, m.Marshal(), 0o644)
}

// fileProgress turns the library's per-file hashing progress into one display over the bytes
// of the directory's files.
type fileProgress struct {
	p    progress
	file string
	done int64
}

func hashProgress(stderr io.Writer, dir string) *fileProgress {
	var total int64
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				total += info.Size()
			}
		}
	}
	return &fileProgress{p: newProgress(stderr, total, "k3 verify: sha256")}
}

func (f *fileProgress) report(file string, done, _ int64) {
	if file != f.file {
		f.file, f.done = file, 0
	}
	f.p.add(done - f.done)
	f.done = done
}

func (f *fileProgress) finish() { f.p.finish() }

// shardInfo is one checked shard.
type shardInfo struct {
	name string
	size int64
}

// checkShards checks every shard's presence, header and size against the index (or, without
// one, every *.safetensors file). err is a failure to read the directory or the index itself.
func checkShards(dir string) ([]shardInfo, []verifyProblem, error) {
	var problems []verifyProblem
	byShard := map[string][]string{} // shard -> tensors the index places there
	var names []string
	totalSize := int64(-1)
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	switch {
	case err == nil:
		wm, ts, err := safetensors.ParseIndex(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, indexFile), err)
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
			return nil, nil, fmt.Errorf("%s: no %s and no *.safetensors file", dir, indexFile)
		}
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	default:
		return nil, nil, err
	}
	slices.Sort(names)
	var shards []shardInfo
	var tensorBytes int64
	for _, name := range names {
		size, sum, msg := checkShard(filepath.Join(dir, name), byShard[name])
		if msg != "" {
			problems = append(problems, verifyProblem{name, msg})
			continue
		}
		shards = append(shards, shardInfo{name, size})
		tensorBytes += sum
	}
	if totalSize >= 0 && len(problems) == 0 && tensorBytes != totalSize {
		problems = append(problems, verifyProblem{indexFile, fmt.Sprintf("total_size %d, the shards hold %d tensor bytes", totalSize, tensorBytes)})
	}
	return shards, problems, nil
}

// checkShard validates one shard's header and size and that it holds the listed tensors. It
// returns the file size, the sum of its tensors' bytes, or a message describing the problem.
func checkShard(path string, listed []string) (size, tensorBytes int64, msg string) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, "missing (the index names it)"
	}
	if err != nil {
		return 0, 0, err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err.Error()
	}
	size = st.Size()
	h, err := safetensors.ReadHeader(path, f)
	if err != nil {
		if errors.Is(err, safetensors.ErrDataBeyondFile) {
			if want, ok := describedSize(f); ok {
				return 0, 0, fmt.Sprintf("truncated: %d bytes, its header describes %d", size, want)
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
		return 0, 0, fmt.Sprintf("%d bytes, its header describes %d", size, want)
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
	if n > safetensors.MaxHeaderSize {
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
