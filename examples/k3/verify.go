package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	var want map[string]string
	if err == nil && a.has("--manifest") {
		want, err = readManifest(a.vals["--manifest"])
	}
	if out := a.vals["--write-manifest"]; err == nil && out != "" && out != "-" {
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
	if want != nil || a.has("--write-manifest") {
		files := manifestFiles(dir, shards)
		got, hashProblems := hashFiles(dir, files, stderr)
		problems = append(problems, hashProblems...)
		if want != nil {
			problems = append(problems, compareManifest(files, got, want, a.vals["--manifest"])...)
		}
		if out := a.vals["--write-manifest"]; out != "" {
			if len(hashProblems) > 0 {
				problems = append(problems, verifyProblem{out, "not written: some files could not be read"})
			} else if err := writeManifest(out, stdout, files, got); err != nil {
				problems = append(problems, verifyProblem{out, err.Error()})
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "k3 verify: %s: %s\n", p.file, p.msg)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "k3 verify: %s: %d problem(s)\n", dir, len(problems))
		return exitRuntime
	}
	what := "sizes match the index"
	if want != nil {
		what += ", sha256 digests match " + a.vals["--manifest"]
	}
	fmt.Fprintf(stderr, "k3 verify: %s: %d shard(s), %.3f GB: %s\n", dir, len(shards), float64(total)/1e9, what)
	return exitOK
}

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

// manifestFiles lists the files a manifest covers: config.json, the index and the tokenizer
// files when present, then the shards.
func manifestFiles(dir string, shards []shardInfo) []string {
	var files []string
	for _, f := range []string{"config.json", indexFile, tokRanksFile, tokConfigFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	for _, s := range shards {
		files = append(files, s.name)
	}
	return files
}

// hashFiles computes the sha256 of each file, with progress on stderr over all their bytes.
// TODO(lead): consolidate with the library's k3.VerifyManifest once it exists.
func hashFiles(dir string, files []string, stderr io.Writer) (map[string]string, []verifyProblem) {
	var total int64
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			total += st.Size()
		}
	}
	got := make(map[string]string, len(files))
	var problems []verifyProblem
	p := newProgress(stderr, total, "k3 verify: sha256")
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			problems = append(problems, verifyProblem{name, err.Error()})
			continue
		}
		h := sha256.New()
		_, err = io.CopyBuffer(io.MultiWriter(h, progressWriter{p}), f, make([]byte, 8<<20))
		f.Close()
		if err != nil {
			problems = append(problems, verifyProblem{name, err.Error()})
			continue
		}
		got[name] = hex.EncodeToString(h.Sum(nil))
	}
	p.finish()
	return got, problems
}

// compareManifest reports every file whose digest differs from the manifest, every checked file
// the manifest lacks and every manifest entry that is not a checked file.
func compareManifest(files []string, got, want map[string]string, manifest string) []verifyProblem {
	var problems []verifyProblem
	for _, f := range files {
		w, ok := want[f]
		switch {
		case !ok:
			problems = append(problems, verifyProblem{f, "not listed in " + manifest})
		case got[f] != "" && got[f] != w:
			problems = append(problems, verifyProblem{f, fmt.Sprintf("sha256 %s, the manifest says %s", got[f], w)})
		}
	}
	var extra []string
	for f := range want {
		if !slices.Contains(files, f) {
			extra = append(extra, f)
		}
	}
	slices.Sort(extra)
	for _, f := range extra {
		problems = append(problems, verifyProblem{f, "listed in " + manifest + " but not part of the checkpoint (missing or not named by the index)"})
	}
	return problems
}

// maxManifest bounds the manifest read (a K3 manifest is under 10 KB).
const maxManifest = 1 << 20

// readManifest parses a sha256sum-format file strictly: "<64 lowercase hex><two spaces or
// space-asterisk><plain file name>" per line, no duplicates, no paths.
func readManifest(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--manifest", "%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, usagef("--manifest", "%v", err)
	}
	if len(b) > maxManifest {
		return nil, usagef("--manifest", "%s is larger than %d bytes", path, maxManifest)
	}
	return parseManifest(path, b)
}

func parseManifest(path string, b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		bad := func(why string) error { return usagef("--manifest", "%s line %d: %s", path, n, why) }
		if len(line) < 67 {
			return nil, bad("expected \"<sha256 hex>  <file name>\"")
		}
		sum, sep, name := line[:64], line[64:66], line[66:]
		if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
			return nil, bad("the digest is not 64 lowercase hex digits")
		}
		if sep != "  " && sep != " *" {
			return nil, bad("the digest must be followed by two spaces or \" *\"")
		}
		if name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
			return nil, bad(fmt.Sprintf("%q is not a plain file name", name))
		}
		if _, dup := out[name]; dup {
			return nil, bad(fmt.Sprintf("%s is listed twice", name))
		}
		out[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("--manifest", "%s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, usagef("--manifest", "%s lists no files", path)
	}
	return out, nil
}

func writeManifest(path string, stdout io.Writer, files []string, got map[string]string) error {
	var b []byte
	for _, f := range files {
		b = fmt.Appendf(b, "%s  %s\n", got[f], f)
	}
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
