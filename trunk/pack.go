package trunk

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/k3-project/k3/internal/fileio/atomicfile"
	"github.com/k3-project/k3/internal/fileio/strictjson"
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
}

// PackOptions configure Pack.
type PackOptions struct {
	// Progress, when set, is called after every chunk written with the bytes copied so far and
	// the total to copy.
	Progress func(done, total int64)
	// ChunkBytes is the copy unit (default 64 MiB).
	ChunkBytes int
}

// Pack writes dir/trunk.bin and dir/trunk.json from layers[L] = layer L's trunk tensors (
// §8.1, §8.2). A layer whose tensors form one contiguous run of one shard is copied verbatim;
// any other layer is gathered, each tensor at a 64-byte aligned offset of its run, in shard and
// offset order. Every run starts and ends 4096-aligned and carries the sha256 of its unpadded
// bytes. trunk.json is written last, after trunk.bin was synced and read back against those
// digests, and appears by an atomic rename: an interrupted pack leaves no trunk.json.
func Pack(dir string, layers [][]SourceTensor, o PackOptions) (*Layout, error) {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 64 << 20
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	layoutPath := filepath.Join(dir, LayoutName)
	if err := os.Remove(layoutPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("trunk: pack: %w", err)
	}
	l := &Layout{NumLayers: len(layers), Align: storage.Alignment}
	type seg struct {
		src      SourceTensor
		runOff   int64
		verbatim bool
	}
	plans := make([][]seg, len(layers))
	var total, at int64
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
		r := LayerRun{Layer: i, FileOff: at}
		if oneShard && hi-lo == own {
			r.Shard, r.RunStart = filepath.Base(srt[0].File), lo
			for _, t := range srt {
				plans[i] = append(plans[i], seg{src: t, runOff: t.Offset - lo, verbatim: true})
			}
			r.Unpadded = hi - lo
		} else {
			var off int64
			for _, t := range srt {
				plans[i] = append(plans[i], seg{src: t, runOff: off})
				off = roundUp(off+t.Size, 64)
			}
			r.Unpadded = plans[i][len(plans[i])-1].runOff + srt[len(srt)-1].Size
		}
		r.NBytes = roundUp(r.Unpadded, storage.Alignment)
		for _, s := range plans[i] {
			r.Tensors = append(r.Tensors, RunTensor{Name: s.src.Name, Off: s.runOff, NBytes: s.src.Size, DType: s.src.DType, Shape: s.src.Shape})
		}
		slices.SortFunc(r.Tensors, func(a, b RunTensor) int { return cmp.Compare(a.Name, b.Name) })
		l.Layers = append(l.Layers, r)
		at += r.NBytes
		total += r.Unpadded
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
	var done int64
	for i := range l.Layers {
		r := &l.Layers[i]
		h := sha256.New()
		var pos int64 // bytes of the run written so far
		for _, s := range plans[i] {
			if gap := s.runOff - pos; gap > 0 {
				// Between verbatim tensors there is nothing (the run is contiguous); between
				// gathered ones, alignment padding.
				z := make([]byte, gap)
				if _, err := out.WriteAt(z, r.FileOff+pos); err != nil {
					return nil, fmt.Errorf("trunk: pack: write %s: %w", bin, err)
				}
				h.Write(z)
				pos += gap
			}
			f := files[s.src.File]
			if f == nil {
				if f, err = storage.Open(s.src.File); err != nil {
					return nil, fmt.Errorf("trunk: pack: %w", err)
				}
				files[s.src.File] = f
			}
			for n := int64(0); n < s.src.Size; {
				k := min(int64(len(buf)), s.src.Size-n)
				if _, err := io.ReadFull(io.NewSectionReader(f, s.src.Offset+n, k), buf[:k]); err != nil {
					return nil, fmt.Errorf("trunk: pack: layer %d: read %s of %s at %d: %w", i, s.src.Name, s.src.File, s.src.Offset+n, shortRead(err))
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

func shortRead(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w", safetensors.ErrShortRead, err)
	}
	return err
}

// verifyBin reads every run back and compares its digest.
func verifyBin(f *os.File, l *Layout, buf []byte) error {
	for _, r := range l.Layers {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, r.FileOff, r.Unpadded), buf); err != nil {
			return fmt.Errorf("trunk: pack: read back layer %d: %w", r.Layer, err)
		}
		if !bytes.Equal(h.Sum(nil), r.SHA256) {
			return fmt.Errorf("%w: layer %d read back differently from what was written", ErrChecksum, r.Layer)
		}
	}
	return nil
}

// writeLayout writes trunk.json through a temporary file and a rename.
func writeLayout(path string, l *Layout) error {
	b := []byte(`{"n_layers":` + strconv.Itoa(l.NumLayers) + `,"align":` + strconv.FormatInt(l.Align, 10) + `,"layers":[`)
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
		b = append(b, `,"nbytes":`...)
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
			b = append(b, "]}"...)
		}
		b = append(b, "}}"...)
	}
	b = append(b, "\n]}\n"...)
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("trunk: pack: %w", err)
	}
	return nil
}
