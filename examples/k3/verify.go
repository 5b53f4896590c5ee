package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

var verifyCmd = command{name: "verify", npos: 1, what: "exactly one model directory", main: verify,
	flags: flagSpec{"--manifest": true, "--write-manifest": true, "--trunk": true}, help: `usage: k3 verify <model_dir> [--manifest FILE | --write-manifest FILE] [--trunk DIR]

Checks a checkpoint's files without loading the model: every shard the index names exists, its
safetensors header is valid, its size is what the header describes, it holds the tensors the
index places in it, and the index's total_size matches. Without an index, every *.safetensors
file of the directory is checked.

  --manifest FILE        also compare the sha256 of config.json, the index, the tokenizer files
                         (when present) and every shard with
                         FILE (sha256sum format: "<hex>  <name>" per line; sha256sum -c reads it)
  --write-manifest FILE  write such a manifest for the files as they are ("-" for stdout)
  --trunk DIR            also check the packed trunk in DIR (k3 pack-trunk, either format): its
                         trunk.json against the model's layers, every layer's sha256 and every
                         lossless12 block; one line per layer, a failing one naming the layer,
                         the tensor and the row and block
  -h, --help             this help

Progress goes to stderr (a bar on a terminal). Every problem is reported, one line naming the
file; the exit code is 0 when all checks pass, 1 when any fails, 2 for usage errors (including
an unreadable or malformed manifest).
`}

// verify is `k3 verify <model_dir>`.
func verify(a *args, stdout, stderr io.Writer) int {
	if a.has("--manifest") && a.has("--write-manifest") {
		a.check(usagef("--write-manifest", "conflicts with --manifest"))
	}
	want := get(a, "--manifest", nil, readManifest)
	out := a.vals["--write-manifest"]
	if a.err == nil {
		a.check(writable("--write-manifest", out))
	}
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	dir := a.pos[0]
	shards, problems, err := safetensors.CheckDir(dir)
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("verify: %w", err))
	}
	var total int64
	for _, size := range shards {
		total += size
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "k3 verify: %s\n", p)
	}
	n := len(problems)
	// The shards are checked against the index when there is one, else each against its own
	// header only: then nothing says how many there should be, and the configuration's tensor
	// count is what catches a missing one.
	_, ierr := os.Lstat(filepath.Join(dir, safetensors.IndexFileName))
	indexed := ierr == nil
	tensors, count := countTensors(dir, shards)
	if count != "" {
		fmt.Fprintf(stderr, "k3 verify: %s\n", count)
		n++
	}
	var need int64
	var cfgProblem string
	if n == 0 { // a broken shard's tensors are not counted: the count would only repeat it
		need, cfgProblem = configTensors(dir, tensors)
	}
	if cfgProblem != "" {
		fmt.Fprintf(stderr, "k3 verify: %s\n", cfgProblem)
		n++
	}
	// Digests are computed only for a checkpoint whose structure holds: a broken one is named
	// above, file by file, without reading all of its bytes.
	if n == 0 && (want != nil || out != "") {
		meter, progress := hashProgress(stderr, dir)
		if want != nil {
			var me *checkpoint.ManifestError
			if err := checkpoint.VerifyManifest(dir, want, progress); errors.As(err, &me) {
				for _, p := range me.Problems {
					fmt.Fprintf(stderr, "k3 verify: %s\n", p)
				}
				n += len(me.Problems)
			} else if err != nil {
				fail(stderr, err)
				n++
			}
		} else if err := writeManifest(dir, out, stdout, progress); err != nil {
			fail(stderr, err)
			n++
		}
		meter.finish()
	}
	if td := a.vals["--trunk"]; a.has("--trunk") {
		n += verifyTrunk(stderr, dir, td)
	}
	if n > 0 {
		fmt.Fprintf(stderr, "k3 verify: %s: %d problem(s)\n", dir, n)
		return exitRuntime
	}
	what := "sizes match the index"
	if !indexed {
		what = "no " + safetensors.IndexFileName + ": each shard's size matches its own header (no index says which shards there should be)"
	}
	switch {
	case need > 0:
		what += fmt.Sprintf("; %d tensors, the configuration needs at least %d", tensors, need)
	default:
		what += fmt.Sprintf("; %d tensors, no config.json to count them against", tensors)
	}
	if want != nil {
		what += ", sha256 digests match " + a.vals["--manifest"]
	}
	fmt.Fprintf(stderr, "k3 verify: %s: %d shard(s), %.3f GB: %s\n", dir, len(shards), float64(total)/1e9, what)
	return exitOK
}

// verifyTrunk checks the packed trunk in td against the layers of the model in dir, without
// loading the model: trunk.json (which must name the model's identity, §3.6), then every run's
// sha256 and every lossless12 block ((*trunk.Packed).Verify) — the layers', and the embedding's
// and the head's when the pack holds them. It reports a line per run and returns the number of
// problems.
func verifyTrunk(stderr io.Writer, dir, td string) int {
	problem := func(err error) int {
		fmt.Fprintf(stderr, "k3 verify: trunk %s: %v\n", td, err)
		return 1
	}
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		return problem(fmt.Errorf("the model's layers: %w", err))
	}
	// The trunk must be this model's (§3.6), as k3.Open requires.
	ck, err := safetensors.Open(dir)
	if err != nil {
		return problem(fmt.Errorf("the model: %w", err))
	}
	id, _, err := checkpoint.Identify(ck, cfg)
	ck.Close()
	if err != nil {
		return problem(fmt.Errorf("the model: %w", err))
	}
	exp := checkpoint.TrunkExpect(id.String())
	l, err := trunk.ReadLayout(td, cfg.NumLayers, exp)
	if err != nil {
		return problem(err)
	}
	p, err := trunk.OpenPacked(td, cfg.NumLayers, exp, nil)
	if err != nil {
		return problem(err)
	}
	defer p.Close()
	var total int64
	for _, r := range l.Runs() {
		total += r.Unpadded
	}
	m := newMeter(stderr, total, "k3 verify: trunk", "")
	verr := p.Verify(func(done, _ int64) { m.set(done) })
	m.finish()
	var errs []error
	if j, ok := verr.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if verr != nil {
		errs = []error{verr}
	}
	n := 0
	for _, e := range errs { // an error that names no run (a read failing) is still reported
		if _, ok := errors.AsType[*trunk.LayerError](e); !ok {
			n += problem(e)
		}
	}
	for _, r := range l.Runs() {
		var mine []error
		for _, e := range errs {
			if le, ok := errors.AsType[*trunk.LayerError](e); ok && le.Layer == r.Layer {
				mine = append(mine, e)
			}
		}
		if len(mine) > 0 {
			for _, e := range mine {
				n += problem(e)
			}
			continue
		}
		l12 := 0
		for _, t := range r.Tensors {
			if t.Format == trunk.FormatLossless12 {
				l12++
			}
		}
		what := "no sha256 recorded"
		if r.SHA256 != nil {
			what = "sha256 matches"
		}
		blocks := ""
		if l12 > 0 {
			blocks = fmt.Sprintf(" (%d lossless12, every block valid)", l12)
		}
		name := fmt.Sprintf("layer %d", r.Layer)
		switch r.Layer {
		case trunk.Embed:
			name = "embedding"
		case trunk.Head:
			name = "lm_head"
		}
		fmt.Fprintf(stderr, "k3 verify: trunk %s: %s: ok: %d tensors%s, %s, %s\n",
			td, name, len(r.Tensors), blocks, size(r.Unpadded), what)
	}
	if n == 0 {
		runs := fmt.Sprintf("%d layer(s)", len(l.Layers))
		if l.Embedding != nil {
			runs += " + embedding"
		}
		if l.Head != nil {
			runs += " + lm_head"
		}
		fmt.Fprintf(stderr, "k3 verify: trunk %s: %s, %s: ok\n", td, runs, size(total))
	}
	return n
}

// readManifest reads --manifest; an unreadable or malformed file is a usage error.
func readManifest(flag, path string) (*checkpoint.Manifest, error) {
	r, closer, err := openRegular(path)
	if err != nil {
		return nil, usagef(flag, "%v", err)
	}
	defer closer.Close()
	m, err := checkpoint.ReadManifest(r)
	if err != nil {
		return nil, usagef(flag, "%s: %v", path, err)
	}
	return m, nil
}

// writeManifest writes the manifest of dir to path ("-": stdout).
func writeManifest(dir, path string, stdout io.Writer, progress checkpoint.Progress) error {
	m, err := checkpoint.BuildManifest(dir, progress)
	if err != nil {
		return err
	}
	return writeOutput(path, stdout, m.Marshal())
}

// hashProgress shows the library's per-file hashing progress as one meter over the bytes of the
// directory's files.
func hashProgress(stderr io.Writer, dir string) (*meter, checkpoint.Progress) {
	var total int64
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				total += info.Size()
			}
		}
	}
	m := newMeter(stderr, total, "k3 verify: sha256", "")
	var file string
	var before int64 // the bytes of the files hashed before file
	return m, func(f string, done, _ int64) {
		if f != file {
			file, before = f, m.done
		}
		m.set(before + done)
	}
}

// countTensors is the number of tensors in the shards that passed CheckDir (their headers read
// again, through opens that cannot block), or a problem naming a shard whose header can no
// longer be read (it changed since it was checked).
func countTensors(dir string, shards map[string]int64) (int, string) {
	n := 0
	for name := range shards {
		f, err := storage.Open(filepath.Join(dir, name)) // cannot block on a FIFO
		if err != nil {
			return n, fmt.Sprintf("%s: changed while verified: %v", name, err)
		}
		h, err := safetensors.ReadHeader(filepath.Join(dir, name), f)
		f.Close()
		if err != nil {
			return n, fmt.Sprintf("%s: changed while verified: %v", name, err)
		}
		n += len(h.Tensors)
	}
	return n, ""
}

// configTensors checks tensors against the tensor count dir/config.json needs: need is that
// count (0 without a config.json), problem names a configuration that cannot be read or that
// needs more tensors than the shards hold.
func configTensors(dir string, tensors int) (need int64, problem string) {
	path := filepath.Join(dir, "config.json")
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return 0, ""
	}
	cfg, err := config.Load(path)
	if err != nil {
		return 0, fmt.Sprintf("config.json: %v", err)
	}
	if err := cfg.CheckAgainst(tensors); err != nil {
		return cfg.MinTensors(), fmt.Sprintf("config.json: %v (a shard is missing?)", err)
	}
	return cfg.MinTensors(), ""
}

// openRegular opens path for reading through storage.Open, which refuses a FIFO, device or
// socket without blocking, and returns a reader of its bytes and what to close.
func openRegular(path string) (io.Reader, io.Closer, error) {
	f, err := storage.Open(path)
	if err != nil {
		return nil, nil, err
	}
	n, err := storage.Size(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return io.NewSectionReader(f, 0, n), f, nil
}
