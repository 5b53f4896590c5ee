package trunk

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/k3-project/k3/atomicfile"
	"github.com/k3-project/k3/internal/fileio/strictjson"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// SourceTensor is one trunk tensor to pack, located in a checkpoint shard.
type SourceTensor struct {
	Name   string
	File   string // shard path
	Offset int64  // absolute
	Size   int64
	DType  string // as in the shard header ("BF16", "F32", …)
	Shape  []int64
	// Matrix marks a weight matrix the layer math multiplies by, which PackOptions.Format may
	// encode; any other tensor (a vector widened once at open) is always copied as stored.
	Matrix bool
}

// PackOptions configure Pack.
type PackOptions struct {
	// Progress, when set, is called after every chunk written with the bytes copied so far and
	// the total to copy.
	Progress func(done, total int64)
	// ChunkBytes is the copy unit (default 64 MiB).
	ChunkBytes int
	// Format is the encoding of the matrices: "" or FormatBF16 copies every tensor as it is
	// (a trunk.json without format fields, as before); FormatLossless12 encodes every
	// two-dimensional BF16 tensor in lossless12 (§6.11) where that saves bytes and records the
	// others as bf16, every layer gathered.
	Format string
	// Embedding and Head, when set, are the embedding table and the output head: each is packed
	// after the last layer in a run of its own (trunk.json's "embedding" and "head", §8.2) with
	// its own sha256, and encoded as a layer's matrices are.
	Embedding, Head *SourceTensor
	// Model is the packed checkpoint's identity (§3.6) as hex, recorded in trunk.json so that
	// the trunk is refused with another model ("" records none).
	Model string
}

// Pack writes dir/trunk.bin and dir/trunk.json from layers[L] = layer L's trunk tensors (
// §8.1, §8.2), then o.Embedding and o.Head. A layer whose tensors form one contiguous run of one
// shard is copied verbatim; any other layer is gathered, each tensor at a 64-byte aligned offset
// of its run, in shard and offset order. Every run starts and ends 4096-aligned and carries the
// sha256 of its unpadded bytes. trunk.json is written last, after trunk.bin was synced and read
// back against those digests, and appears by an atomic rename: an interrupted pack leaves no
// trunk.json.
func Pack(dir string, layers [][]SourceTensor, o PackOptions) (*Layout, error) {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 64 << 20
	}
	encode := false
	switch o.Format {
	case "", FormatBF16:
	case FormatLossless12:
		encode = true
	default:
		return nil, fmt.Errorf("trunk: pack: format %q is not bf16 or lossless12", o.Format)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	layoutPath := filepath.Join(dir, LayoutName)
	if err := os.Remove(layoutPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	if o.Model != "" && !isIdentity(o.Model) {
		return nil, fmt.Errorf("trunk: pack: model identity %q is not 64 lowercase hex digits", o.Model)
	}
	l := &Layout{NumLayers: len(layers), Align: storage.Alignment, Model: o.Model}
	type seg struct {
		src    SourceTensor
		runOff int64
	}
	// The runs in trunk.bin order: the layers, then the embedding table and the head.
	runs := make([]LayerRun, 0, len(layers)+2)
	var plans [][]seg
	var total, at int64
	add := func(r LayerRun, segs []seg, own int64) {
		r.FileOff = at
		r.NBytes = roundUp(r.Unpadded, storage.Alignment)
		for _, s := range segs {
			r.Tensors = append(r.Tensors, RunTensor{Name: s.src.Name, Off: s.runOff, NBytes: s.src.Size, DType: s.src.DType, Shape: s.src.Shape})
		}
		slices.SortFunc(r.Tensors, func(a, b RunTensor) int { return cmp.Compare(a.Name, b.Name) })
		runs, plans = append(runs, r), append(plans, segs)
		at += r.NBytes
		total += r.Unpadded
		if encode {
			total += own - r.Unpadded // progress counts the source bytes read
		}
	}
	for i, ts := range layers {
		if len(ts) == 0 {
			return nil, fmt.Errorf("trunk: pack: layer %d has no trunk tensors", i)
		}
		srt := slices.Clone(ts)
		slices.SortFunc(srt, func(a, b SourceTensor) int {
			if c := cmp.Compare(a.File, b.File); c != 0 {
				return c
			}
			return cmp.Compare(a.Offset, b.Offset)
		})
		lo, hi, own := srt[0].Offset, int64(0), int64(0)
		oneShard := true
		for _, t := range srt {
			hi = max(hi, t.Offset+t.Size)
			own += t.Size
			oneShard = oneShard && t.File == srt[0].File
		}
		r := LayerRun{Layer: i}
		var segs []seg
		if oneShard && hi-lo == own && !encode {
			r.Shard, r.RunStart = filepath.Base(srt[0].File), lo
			for _, t := range srt {
				segs = append(segs, seg{src: t, runOff: t.Offset - lo})
			}
			r.Unpadded = hi - lo
		} else {
			var off int64
			for _, t := range srt {
				segs = append(segs, seg{src: t, runOff: off})
				off = roundUp(off+t.Size, 64)
			}
			r.Unpadded = segs[len(segs)-1].runOff + srt[len(srt)-1].Size
		}
		add(r, segs, own)
	}
	for _, mr := range modelRuns {
		src := o.Embedding
		if mr.item == Head {
			src = o.Head
		}
		if src != nil {
			add(LayerRun{Layer: mr.item, Unpadded: src.Size}, []seg{{src: *src}}, src.Size)
		}
	}

	bin := filepath.Join(dir, BinName)
	out, err := os.Create(bin)
	if err != nil {
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	defer out.Close()
	buf := make([]byte, o.ChunkBytes)
	files := map[string]storage.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var done, encAt int64
	for i := range runs {
		r := &runs[i]
		name := itemName(r.Layer)
		h := sha256.New()
		var pos int64 // bytes of the run written so far
		if encode {
			// Encoded sizes are known only once each tensor is encoded: the run's tensors are
			// laid out as they are written.
			r.FileOff = encAt
			r.Tensors = r.Tensors[:0]
		}
		pad := func(to int64) error {
			// Between verbatim tensors there is nothing (the run is contiguous); between
			// gathered ones, alignment padding.
			if gap := to - pos; gap > 0 {
				z := make([]byte, gap)
				if _, err := out.WriteAt(z, r.FileOff+pos); err != nil {
					return fmt.Errorf("trunk: pack: write %s: %w", bin, err)
				}
				h.Write(z)
				pos += gap
			}
			return nil
		}
		for k := range plans[i] {
			s := &plans[i][k]
			f := files[s.src.File]
			if f == nil {
				if f, err = storage.Open(s.src.File); err != nil {
					return nil, fmt.Errorf("trunk: pack: %w", err)
				}
				files[s.src.File] = f
			}
			if encode {
				s.runOff = roundUp(pos, 64)
				data, rt, err := encodeTensor(f, s.src)
				if err != nil {
					return nil, fmt.Errorf("trunk: pack: %s: %w", name, err)
				}
				rt.Off = s.runOff
				r.Tensors = append(r.Tensors, rt)
				if err := pad(s.runOff); err != nil {
					return nil, err
				}
				if _, err := out.WriteAt(data, r.FileOff+pos); err != nil {
					return nil, fmt.Errorf("trunk: pack: write %s: %w", bin, err)
				}
				h.Write(data)
				pos += int64(len(data))
				done += s.src.Size
				if o.Progress != nil {
					o.Progress(done, total)
				}
				continue
			}
			if err := pad(s.runOff); err != nil {
				return nil, err
			}
			for n := int64(0); n < s.src.Size; {
				k := min(int64(len(buf)), s.src.Size-n)
				if _, err := io.ReadFull(io.NewSectionReader(f, s.src.Offset+n, k), buf[:k]); err != nil {
					return nil, fmt.Errorf("trunk: pack: %s: read %s of %s at %d: %w", name, s.src.Name, s.src.File, s.src.Offset+n, shortRead(err))
				}
				if _, err := out.WriteAt(buf[:k], r.FileOff+pos); err != nil {
					return nil, fmt.Errorf("trunk: pack: write %s: %w", bin, err)
				}
				h.Write(buf[:k])
				n += k
				pos += k
				done += k
				if o.Progress != nil {
					o.Progress(done, total)
				}
			}
		}
		r.SHA256 = h.Sum(nil)
		if encode {
			r.Unpadded = pos
			r.NBytes = roundUp(pos, storage.Alignment)
			encAt += r.NBytes
			slices.SortFunc(r.Tensors, func(a, b RunTensor) int { return cmp.Compare(a.Name, b.Name) })
		}
	}
	if encode {
		at = encAt
	}
	l.Layers = runs[:len(layers):len(layers)]
	for i := len(layers); i < len(runs); i++ {
		*l.run(runs[i].Layer) = &runs[i]
	}
	if err := out.Truncate(at); err != nil { // the last run's tail padding
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	if err := out.Sync(); err != nil {
		return nil, fmt.Errorf("trunk: pack: sync %s: %w", bin, err)
	}
	if err := verifyBin(out, l, buf); err != nil {
		return nil, err
	}
	if err := writeLayout(layoutPath, l); err != nil {
		return nil, err
	}
	return l, nil
}

// encodeTensor reads one tensor of a lossless12 pack and returns the bytes to write and its
// entry: a two-dimensional BF16 matrix is encoded (§6.11) when that saves bytes, checked by
// decoding every row back to the bytes it came from, and recorded as bf16 otherwise; any other
// tensor is copied as it is.
func encodeTensor(f storage.File, src SourceTensor) ([]byte, RunTensor, error) {
	rt := RunTensor{Name: src.Name, NBytes: src.Size, DType: src.DType, Shape: src.Shape}
	raw := make([]byte, src.Size)
	if _, err := io.ReadFull(io.NewSectionReader(f, src.Offset, src.Size), raw); err != nil {
		return nil, rt, fmt.Errorf("read %s of %s at %d: %w", src.Name, src.File, src.Offset, shortRead(err))
	}
	if !src.Matrix || src.DType != "BF16" || len(src.Shape) != 2 || src.Shape[0] <= 0 || src.Shape[1] <= 0 ||
		src.Shape[0]*src.Shape[1]*2 != src.Size || src.Shape[0] > math.MaxInt32 || src.Shape[1] > math.MaxInt32 {
		return raw, rt, nil
	}
	rows, cols := int(src.Shape[0]), int(src.Shape[1])
	rt.Format = FormatBF16
	enc, err := lossless12.Encode(rows, cols, raw)
	if err != nil {
		return nil, rt, fmt.Errorf("encode %s: %w", src.Name, err)
	}
	if int64(len(enc)) >= src.Size {
		return raw, rt, nil // the format would not save bytes: kept in bf16
	}
	m, err := lossless12.Open(enc)
	if err != nil {
		return nil, rt, fmt.Errorf("encode %s: %w", src.Name, err)
	}
	row := make([]byte, 2*cols)
	for r := range rows {
		m.DecodeRowBF16(row, r)
		if !bytes.Equal(row, raw[2*r*cols:2*(r+1)*cols]) {
			return nil, rt, fmt.Errorf("encode %s: row %d does not decode to its bf16 bytes", src.Name, r)
		}
	}
	rt.DType, rt.Format, rt.Escapes, rt.NBytes = "U8", FormatLossless12, m.Header().Escapes, int64(len(enc))
	return enc, rt, nil
}

func shortRead(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w", safetensors.ErrShortRead, err)
	}
	return err
}

// verifyBin reads every run back and compares its digest.
func verifyBin(f *os.File, l *Layout, buf []byte) error {
	for _, r := range l.Runs() {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, r.FileOff, r.Unpadded), buf); err != nil {
			return fmt.Errorf("trunk: pack: read back %s: %w", itemName(r.Layer), err)
		}
		if !bytes.Equal(h.Sum(nil), r.SHA256) {
			return fmt.Errorf("%w: %s read back differently from what was written", ErrChecksum, itemName(r.Layer))
		}
	}
	return nil
}

// writeLayout writes trunk.json through a temporary file and a rename.
func writeLayout(path string, l *Layout) error {
	b := []byte(`{"n_layers":` + strconv.Itoa(l.NumLayers) + `,"align":` + strconv.FormatInt(l.Align, 10))
	if l.Model != "" {
		b = append(b, `,"model":"`+l.Model+`"`...)
	}
	b = append(b, `,"layers":[`...)
	for i, r := range l.Layers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n{\"layer\":"...)
		b = strconv.AppendInt(b, int64(r.Layer), 10)
		b = append(b, `,"shard":`...)
		b = strictjson.AppendQuote(b, r.Shard)
		b = append(b, `,"run_start":`...)
		b = strconv.AppendInt(b, r.RunStart, 10)
		b = append(b, ',')
		b = appendRun(b, &r)
	}
	b = append(b, "\n]"...)
	for _, mr := range modelRuns {
		if r := *l.run(mr.item); r != nil {
			b = append(b, ",\n"...)
			b = strictjson.AppendQuote(b, mr.key)
			b = append(b, ":{"...)
			b = appendRun(b, r)
		}
	}
	b = append(b, "}\n"...)
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("trunk: pack: %w", err)
	}
	return nil
}

// appendRun appends a run's nbytes, file_off, sha256 and tensors, and the brace that closes it.
func appendRun(b []byte, r *LayerRun) []byte {
	b = append(b, `"nbytes":`...)
	b = strconv.AppendInt(b, r.NBytes, 10)
	b = append(b, `,"file_off":`...)
	b = strconv.AppendInt(b, r.FileOff, 10)
	b = append(b, `,"sha256":"`...)
	b = append(b, hex.EncodeToString(r.SHA256)...)
	b = append(b, `","tensors":{`...)
	for k, t := range r.Tensors {
		if k > 0 {
			b = append(b, ',')
		}
		b = strictjson.AppendQuote(b, t.Name)
		b = append(b, `:{"off":`...)
		b = strconv.AppendInt(b, t.Off, 10)
		b = append(b, `,"nbytes":`...)
		b = strconv.AppendInt(b, t.NBytes, 10)
		b = append(b, `,"dtype":`...)
		b = strictjson.AppendQuote(b, t.DType)
		b = append(b, `,"shape":[`...)
		for d, n := range t.Shape {
			if d > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, n, 10)
		}
		b = append(b, ']')
		if t.Format != "" {
			b = append(b, `,"format":`...)
			b = strictjson.AppendQuote(b, t.Format)
		}
		if t.Format == FormatLossless12 {
			b = append(b, `,"escapes":`...)
			b = strconv.AppendInt(b, int64(t.Escapes), 10)
		}
		b = append(b, '}')
	}
	return append(b, "}}"...)
}
