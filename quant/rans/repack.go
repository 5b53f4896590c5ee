package rans

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/k3-project/k3/internal/fileio/strictjson"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// ErrOutputNotEmpty reports an existing, non-empty output directory given to
// Repack without Force.
var ErrOutputNotEmpty = errors.New("rans: output directory is not empty")

// ErrNotSelectable reports a selected tensor that cannot be coded: not a
// 2-D U8/I8 weight of a 4-bit format, scale tensor missing, or already coded.
var ErrNotSelectable = errors.New("rans: selected tensor cannot be coded")

// Selector picks the tensors to code. For a weight tensor to code it returns
// the name of its scale tensor and true; the scale decides the 4-bit format
// (quant.Resolve) and stays raw. The rule is the caller's: this package
// knows no model's tensor names.
type Selector func(name string) (scale string, ok bool)

// Progress is one report of Repack or Verify. Tensors and Bytes count the
// coded tensors done so far and their decoded bytes; Stored counts the
// stored (record) bytes of those tensors.
type Progress struct {
	Op           string // "code", "write", "link", "copy", "verify"
	File, Tensor string // what was just done (base names)
	Tensors      int
	TotalTensors int
	Bytes        int64
	TotalBytes   int64
	Stored       int64
}

// RepackOptions configures Repack.
type RepackOptions struct {
	Select   Selector       // required
	Progress func(Progress) // optional; called from one goroutine at a time
	// Force writes into a non-empty output directory, replacing the output of an earlier
	// Repack: before anything is written its manifest is removed, so the old output is no
	// longer accepted by Verify, then its index and shards (the *.safetensors files) and the
	// temporaries an interrupted Repack left (spill files among them).
	Force   bool
	Workers int // coding goroutines; ≤ 0 means GOMAXPROCS
	// Context, when set, stops Repack early: between tensors and between the chunks of a
	// copy it returns the context's error, having removed its spill file and any file it
	// had not finished; the output then has no manifest.
	Context context.Context
}

// Repack writes a complete checkpoint directory out whose selected tensors
// are CFS1 records stamped with their container format (§6.9.2), from
// the checkpoint directory src. Shards holding a selected tensor are
// rewritten with every other tensor and all metadata unchanged (tensor
// order kept); other shards and every other file are hard-linked, or copied
// where linking fails; the index is rewritten with the new total size. The
// manifest (ManifestFileName) is written last, so its presence marks a
// finished repack. The output depends only on src and the selection.
//
// Each record is decoded and compared with its source before it is written
// (package cfs1's Encode), and the manifest holds the SHA-256 of the source
// bytes. Memory is bounded by Workers source tensors and records: coded
// records are spilled to a temporary file in out while a shard is built,
// removed when the shard is written or Repack fails. Nothing is written
// before the source and the selection are checked, and nothing inside src.
func Repack(src, out string, opts RepackOptions) (*Manifest, error) {
	if opts.Select == nil {
		return nil, errors.New("rans: repack: no selector")
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if same(src, out) {
		return nil, fmt.Errorf("rans: repack: output %s is the source directory", out)
	}
	if inside(src, out) {
		return nil, fmt.Errorf("rans: repack: output %s is inside the source directory", out)
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ck, err := safetensors.Open(src)
	if err != nil {
		return nil, fmt.Errorf("rans: repack: %w", err)
	}
	defer ck.Close()
	stamps, err := quant.LoadStamps(ck.Metadata())
	if err != nil {
		return nil, fmt.Errorf("rans: repack: %w", err)
	}
	plan, err := planRepack(ck, stamps, opts.Select)
	if err != nil {
		return nil, err
	}
	r := &repacker{ck: ck, out: out, opts: opts, ctx: ctx, workers: workers, plan: plan}
	// The copy keeps its model's identity (§3.6); the manifest carries it so a copy whose dense
	// shards change later is refused (CheckModel).
	if r.man.Model, err = identify(src, ck); err != nil {
		return nil, fmt.Errorf("rans: repack: %w", err)
	}
	// Only now, with the source read and the selection valid, is the output touched.
	if err := prepareOut(out, opts.Force); err != nil {
		return nil, err
	}
	for _, j := range plan.jobs {
		r.prog.TotalTensors++
		r.prog.TotalBytes += j.t.Size
	}
	if err := r.copyOthers(src); err != nil {
		return nil, err
	}
	meta := ck.Metadata()
	for _, path := range ck.Shards() {
		base := filepath.Base(path)
		jobs := plan.byShard[path]
		if len(jobs) == 0 {
			if err := r.link(path, filepath.Join(out, base)); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.shard(path, meta[base], jobs); err != nil {
			return nil, err
		}
	}
	// A cancelled Repack must not write the index or the manifest: those make the output a
	// checkpoint.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rans: repack: %w", err)
	}
	if ck.HasIndex() {
		if err := r.index(); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rans: repack: %w", err)
	}
	slices.SortFunc(r.man.Tensors, func(a, b ManifestEntry) int { return cmpString(a.Name, b.Name) })
	r.man.Version = ManifestVersion
	b, err := r.man.encode()
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(out, ManifestFileName), b); err != nil {
		return nil, err
	}
	return &r.man, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CodedFormat returns the CFS1 container stamped on a coded weight of base
// format f (mxfp4 → mxfp4-cfs1, int4-row → int4-row-cfs1, int4-grouped →
// int4-grouped-cfs1).
func CodedFormat(f quant.Format) (quant.Format, bool) {
	switch f {
	case quant.MXFP4:
		return quant.MXFP4CFS1, true
	case quant.Int4Row:
		return quant.Int4RowCFS1, true
	case quant.Int4Grouped:
		return quant.Int4GroupedCFS1, true
	}
	return 0, false
}

type job struct {
	t      *safetensors.Tensor
	format quant.Format // base format
}

type repackPlan struct {
	jobs    []job
	byShard map[string][]job
}

// planRepack resolves the format of every selected tensor before anything is
// written, so a bad selection fails without output.
func planRepack(ck *safetensors.Checkpoint, stamps *quant.Stamps, sel Selector) (*repackPlan, error) {
	p := &repackPlan{byShard: map[string][]job{}}
	var errs []error
	for _, t := range ck.Tensors() {
		scaleName, ok := sel(t.Name)
		if !ok {
			continue
		}
		f, err := selectable(ck, stamps, t, scaleName)
		if err != nil {
			errs = append(errs, err)
			if len(errs) == 8 {
				break
			}
			continue
		}
		j := job{t: t, format: f}
		p.jobs = append(p.jobs, j)
		p.byShard[t.File] = append(p.byShard[t.File], j)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

func selectable(ck *safetensors.Checkpoint, stamps *quant.Stamps, t *safetensors.Tensor, scaleName string) (quant.Format, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %q: %s", ErrNotSelectable, t.Name, fmt.Sprintf(format, a...))
	}
	if st, _, ok := stamps.Lookup(t.Name); ok {
		if f, err := quant.ParseFormat(st); err == nil && f.Coded() {
			return 0, bad("already stamped %s", st)
		}
	}
	if (t.DType != safetensors.U8 && t.DType != safetensors.I8) || len(t.Shape) != 2 {
		return 0, bad("%v%v is not a 2-D U8/I8 packed weight", t.DType, t.Shape)
	}
	sc, ok := ck.Tensor(scaleName)
	if !ok {
		return 0, bad("scale tensor %q not found", scaleName)
	}
	O, I := int(t.Shape[0]), 2*int(t.Shape[1])
	f, _, err := stamps.ResolvePair(t.Name, scaleName, O, I,
		quant.TensorDesc{DType: t.DType.String(), NBytes: t.Size},
		&quant.TensorDesc{DType: sc.DType.String(), NBytes: sc.Size})
	if err != nil {
		return 0, bad("%v", err)
	}
	if _, ok := CodedFormat(f); !ok {
		return 0, bad("format %s has no CFS1 container", f)
	}
	return f, nil
}

// codedTensor is one coded tensor: its record's place in the spill file,
// its manifest entry and its stamp.
type codedTensor struct {
	off, n int64
	entry  ManifestEntry
	stamp  string
}

type repacker struct {
	ck      *safetensors.Checkpoint
	out     string
	opts    RepackOptions
	ctx     context.Context
	workers int
	plan    *repackPlan
	man     Manifest
	prog    Progress
	sizes   map[string]int64 // tensor → stored size, for the index
}

func (r *repacker) report(op, file, tensor string) {
	if r.opts.Progress == nil {
		return
	}
	p := r.prog
	p.Op, p.File, p.Tensor = op, file, tensor
	r.opts.Progress(p)
}

// shard codes the selected tensors of one shard and writes it.
func (r *repacker) shard(path string, meta map[string]string, jobs []job) error {
	base := filepath.Base(path)
	spill, err := os.CreateTemp(r.out, spillPattern)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	defer func() {
		spill.Close()
		os.Remove(spill.Name())
	}()
	results := make([]codedTensor, len(jobs))
	var (
		mu      sync.Mutex
		spilled int64
		first   error
		next    int
	)
	var wg sync.WaitGroup
	for range min(r.workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if err := r.ctx.Err(); first == nil && err != nil {
					first = fmt.Errorf("rans: repack: %w", err)
				}
				if first != nil || next == len(jobs) {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				res, rec, err := r.code(jobs[i])
				mu.Lock()
				if err == nil {
					res.off, res.n = spilled, int64(len(rec))
					_, err = spill.WriteAt(rec, spilled)
					spilled += res.n
				}
				if err != nil {
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				results[i] = res
				r.prog.Tensors++
				r.prog.Bytes += res.entry.DecodedBytes
				r.prog.Stored += res.entry.RecordBytes
				r.report("code", base, jobs[i].t.Name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	coded := map[string]int{}
	stamps := map[string]string{}
	for i, j := range jobs {
		coded[j.t.Name] = i
		stamps[j.t.Name] = results[i].stamp
		r.man.Tensors = append(r.man.Tensors, results[i].entry)
	}
	newMeta, err := Metadata(base, meta, stamps)
	if err != nil {
		return err
	}
	var ws []safetensors.WriteTensor
	for _, t := range r.ck.Tensors() {
		if t.File != path {
			continue
		}
		t := t
		if i, ok := coded[t.Name]; ok {
			res := results[i]
			ws = append(ws, safetensors.WriteTensor{Name: t.Name, DType: safetensors.U8, Shape: []int64{res.n},
				Fill: func(w io.Writer) error {
					return copyCtx(r.ctx, w, io.NewSectionReader(spill, res.off, res.n))
				}})
			r.setSize(t.Name, res.n)
			continue
		}
		ws = append(ws, safetensors.WriteTensor{Name: t.Name, DType: t.DType, Shape: slices.Clone(t.Shape),
			Fill: func(w io.Writer) error {
				b, err := r.ck.Bytes(t)
				if err != nil {
					return err
				}
				return writeCtx(r.ctx, w, b)
			}})
		r.setSize(t.Name, t.Size)
	}
	if err := safetensors.WriteFile(filepath.Join(r.out, base), ws, newMeta); err != nil {
		if cerr := r.ctx.Err(); cerr != nil {
			return fmt.Errorf("rans: repack: %w", cerr)
		}
		return fmt.Errorf("rans: repack: %w", err)
	}
	r.report("write", base, "")
	return nil
}

func (r *repacker) setSize(name string, n int64) {
	if r.sizes == nil {
		r.sizes = map[string]int64{}
	}
	r.sizes[name] = n
}

// code encodes one tensor; the record is verified by cfs1.Encode.
func (r *repacker) code(j job) (codedTensor, []byte, error) {
	var res codedTensor
	src, err := r.ck.Bytes(j.t)
	if err != nil {
		return res, nil, fmt.Errorf("rans: repack: %w", err)
	}
	cf, ok := CodedFormat(j.format)
	if !ok {
		return res, nil, fmt.Errorf("rans: repack %q: %s has no CFS1 container", j.t.Name, j.format)
	}
	rec, err := Encode(src)
	if err != nil {
		return res, nil, fmt.Errorf("rans: repack %q: %w", j.t.Name, err)
	}
	if n, err := DecodedLen(rec); err != nil || int64(n) != j.t.Size {
		return res, nil, fmt.Errorf("rans: repack %q: internal error: record declares %d bytes, tensor has %d (%v)", j.t.Name, n, j.t.Size, err)
	}
	sum := sha256.Sum256(src)
	res.stamp = cf.String()
	res.entry = ManifestEntry{Name: j.t.Name, Format: cf.String(), DType: j.t.DType.String(), Shape: slices.Clone(j.t.Shape),
		DecodedBytes: j.t.Size, RecordBytes: int64(len(rec)), SHA256: hex.EncodeToString(sum[:])}
	return res, rec, nil
}

// index writes the rewritten model.safetensors.index.json: the same weight
// map, sorted, with total_size recomputed from the stored sizes.
func (r *repacker) index() error {
	var total int64
	names := make([]string, 0, r.ck.Len())
	for _, t := range r.ck.Tensors() {
		n, ok := r.sizes[t.Name]
		if !ok {
			n = t.Size
		}
		total += n
		names = append(names, t.Name)
	}
	slices.Sort(names)
	b := []byte("{\n  \"metadata\": {\n    \"total_size\": ")
	b = strconv.AppendInt(b, total, 10)
	b = append(b, "\n  },\n  \"weight_map\": {"...)
	for i, n := range names {
		t, _ := r.ck.Tensor(n)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = strictjson.AppendQuote(b, n)
		b = append(b, ": "...)
		b = strictjson.AppendQuote(b, filepath.Base(t.File))
	}
	b = append(b, "\n  }\n}\n"...)
	return writeFileAtomic(filepath.Join(r.out, safetensors.IndexFileName), b)
}

// copyOthers links or copies every file of src that is neither a shard nor
// the index nor a manifest, keeping the directory layout. Symbolic links are
// followed, so a checkpoint in the Hugging Face cache layout (every file a
// relative link into a blob store) gives a complete output; a link that
// leads nowhere, or back into a directory already being walked, is an error,
// not a file quietly left out.
func (r *repacker) copyOthers(src string) error {
	shards := map[string]bool{}
	for _, p := range r.ck.Shards() {
		shards[filepath.Clean(p)] = true
	}
	return r.copyDir(src, src, "", shards, nil)
}

// copyDir copies the directory dir (at rel inside the output) into the
// output. visited holds the directories on the way down, by identity, so a
// link cycle ends in an error instead of a walk without end.
func (r *repacker) copyDir(src, dir, rel string, shards map[string]bool, visited []os.FileInfo) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	for _, v := range visited {
		if os.SameFile(v, st) {
			return fmt.Errorf("rans: repack: %s: symbolic links form a cycle", filepath.Join(src, rel))
		}
	}
	visited = append(visited, st)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	for _, e := range ents {
		p, r2 := filepath.Join(dir, e.Name()), filepath.Join(rel, e.Name())
		if shards[filepath.Clean(filepath.Join(src, r2))] || r2 == safetensors.IndexFileName || r2 == ManifestFileName {
			continue
		}
		fi, err := os.Stat(p) // follows a symbolic link to what it names
		if err != nil {
			return fmt.Errorf("rans: repack: %s: %w", filepath.Join(src, r2), err)
		}
		switch {
		case fi.IsDir():
			if err := os.MkdirAll(filepath.Join(r.out, r2), 0o755); err != nil {
				return fmt.Errorf("rans: repack: %w", err)
			}
			if err := r.copyDir(src, p, r2, shards, visited); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := r.link(p, filepath.Join(r.out, r2)); err != nil {
				return err
			}
		}
		// Sockets, devices and FIFOs are not part of a checkpoint.
	}
	return nil
}

// link hard-links src to dst, or copies it where linking is impossible.
func (r *repacker) link(src, dst string) error {
	// os.Link does not follow a symbolic link: linking one would copy the
	// link, which dangles in the output when it is relative.
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	if err := os.Link(src, dst); err == nil {
		r.report("link", filepath.Base(dst), "")
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), copyPattern)
	if err != nil {
		return fmt.Errorf("rans: repack: %w", err)
	}
	err = copyCtx(r.ctx, tmp, in)
	if fi, serr := in.Stat(); err == nil && serr == nil {
		err = tmp.Chmod(fi.Mode().Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("rans: repack: copy %s: %w", filepath.Base(src), err)
	}
	r.report("copy", filepath.Base(dst), "")
	return nil
}

// same reports whether a and b name one existing file or directory.
func same(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// inside reports whether path out lies under directory src.
func inside(src, out string) bool {
	a, err1 := resolve(src)
	b, err2 := resolve(out)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(a, b)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolve returns the absolute path of p with every symbolic link of its
// longest existing prefix resolved, so that an output reached through a link
// into the source is recognised as inside it before it exists.
func resolve(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(p)
		if parent == p || !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// Name patterns (path.Match) of Repack's temporaries in the output directory: coded records
// spilled while a shard is built, copies of files that cannot be linked, small files written
// atomically, and shards being written (safetensors.WriteFile's temporaries).
const (
	spillPattern = ".cfs1-spill-*"
	copyPattern  = ".copy-*"
	tmpPattern   = ".tmp-*"
	shardPattern = ".*.safetensors.*.tmp"
)

func prepareOut(out string, force bool) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("rans: repack: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("rans: repack: %w", err)
	case len(ents) > 0 && !force:
		return fmt.Errorf("%w: %s", ErrOutputNotEmpty, out)
	case len(ents) > 0:
		return invalidate(out, ents)
	}
	return nil
}

// invalidate makes the output of an earlier Repack in out unacceptable before anything new is
// written: the manifest goes first, and the directory is synced, so that a crash at any later
// point leaves no output that Verify accepts; then the index, so that the shards are no longer
// one checkpoint, and the shards themselves, so that a Repack failing midway cannot leave new
// shards beside old ones that a reader without an index would take together; last the
// temporaries an interrupted Repack left behind.
func invalidate(out string, ents []os.DirEntry) error {
	remove := func(name string) error {
		if err := os.Remove(filepath.Join(out, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rans: repack: invalidate the previous output: %w", err)
		}
		return nil
	}
	if err := remove(ManifestFileName); err != nil {
		return err
	}
	if err := syncDir(out); err != nil {
		return fmt.Errorf("rans: repack: invalidate the previous output: %w", err)
	}
	if err := remove(safetensors.IndexFileName); err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".safetensors") || isTemporary(n)) {
			continue
		}
		if err := remove(n); err != nil {
			return err
		}
	}
	return nil
}

// isTemporary reports whether name is one of Repack's temporaries.
func isTemporary(name string) bool {
	for _, p := range [...]string{spillPattern, copyPattern, tmpPattern, shardPattern} {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyChunk is how much a copy moves between two looks at its context.
const copyChunk = 4 << 20

// copyCtx copies r to w in chunks of copyChunk, stopping with ctx's error once ctx is done.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) error {
	buf := make([]byte, copyChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// writeCtx writes b to w in chunks of copyChunk, stopping with ctx's error once ctx is done.
func writeCtx(ctx context.Context, w io.Writer, b []byte) error {
	for len(b) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(b), copyChunk)
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), tmpPattern)
	if err != nil {
		return fmt.Errorf("rans: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes 0600; checkpoint files are world-readable
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("rans: %w", err)
	}
	return nil
}
