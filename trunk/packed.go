package trunk

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// Packed is an opened packed trunk (trunk.bin and trunk.json, §8): each
// layer's dense tensors, and the embedding table and output head when the
// pack holds them, are looked up here instead of in the checkpoint's shards,
// as safetensors tensors whose File is the trunk.bin path, so a Store
// streams them like any other.
type Packed struct {
	bin, layoutPath string
	layout          *Layout
	tensors         map[string]*safetensors.Tensor
	formats         map[string]RunTensor // the lossless12 tensors
	f               storage.File
}

// OpenPacked reads dir/trunk.json, validates it against numLayers and exp
// (ReadLayout) and opens dir/trunk.bin through open (nil: storage.Open).
func OpenPacked(dir string, numLayers int, exp Expect, open storage.Opener) (*Packed, error) {
	l, err := ReadLayout(dir, numLayers, exp)
	if err != nil {
		return nil, err
	}
	p := &Packed{bin: filepath.Join(dir, BinName), layoutPath: filepath.Join(dir, LayoutName),
		layout: l, tensors: map[string]*safetensors.Tensor{}, formats: map[string]RunTensor{}}
	for _, r := range l.Runs() {
		for _, t := range r.Tensors {
			dt, _ := safetensors.ParseDType(t.DType) // ReadLayout allowed only known dtypes
			p.tensors[t.Name] = &safetensors.Tensor{Name: t.Name, DType: dt, Shape: t.Shape, File: p.bin,
				Offset: r.FileOff + t.Off, Size: t.NBytes}
			if t.Format == FormatLossless12 {
				p.formats[t.Name] = t
			}
		}
	}
	if open == nil {
		open = storage.Open
	}
	if p.f, err = open(p.bin); err != nil {
		return nil, fmt.Errorf("packed trunk: %w", err)
	}
	if err := p.checkHeaders(); err != nil {
		p.f.Close()
		return nil, err
	}
	return p, nil
}

// checkHeaders reads every lossless12 tensor's header (§6.11) and refuses the trunk when it is
// malformed or disagrees with trunk.json's shape and escape bytes: the format trunk.json names
// is trusted only as far as the bytes say the same.
func (p *Packed) checkHeaders() error {
	var buf [lossless12.HeaderSize]byte
	for name, rt := range p.formats {
		t := p.tensors[name]
		if err := storage.ReadFull(p.f, buf[:], t.Offset); err != nil {
			return fmt.Errorf("%s: read the lossless12 header of %s: %w", p.bin, name, err)
		}
		h, err := lossless12.ParseHeaderOf(buf[:], t.Size)
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %w", ErrLayout, p.layoutPath, name, err)
		}
		if int64(h.Rows) != rt.Shape[0] || int64(h.Cols) != rt.Shape[1] || h.Escapes != rt.Escapes {
			return fmt.Errorf("%w: %s: %s: trunk.json says lossless12 %v with %d escape bytes a row, its header [%d, %d] with %d",
				ErrLayout, p.layoutPath, name, rt.Shape, rt.Escapes, h.Rows, h.Cols, h.Escapes)
		}
	}
	return nil
}

// Lossless12 reports whether the tensor called name is stored in lossless12 (§6.11) and, if so,
// its escape bytes per row; OpenPacked checked its header against trunk.json. Its
// safetensors.Tensor (Tensor) is U8 with the matrix's [rows, cols] shape and covers the whole
// encoded matrix, header included.
func (p *Packed) Lossless12(name string) (escapes int, ok bool) {
	t, ok := p.formats[name]
	return t.Escapes, ok
}

// Tensor returns the packed tensor called name.
func (p *Packed) Tensor(name string) (*safetensors.Tensor, bool) {
	t, ok := p.tensors[name]
	return t, ok
}

// Holds reports whether t lives in this trunk.bin.
func (p *Packed) Holds(t *safetensors.Tensor) bool { return t.File == p.bin }

// LayoutPath is the path of trunk.json, for messages naming what it lacks.
func (p *Packed) LayoutPath() string { return p.layoutPath }

// Checksums lists every run's sha256 (Options.Verify): the layers', and the embedding's and
// the head's (items Embed and Head) when the pack holds them.
func (p *Packed) Checksums() []Checksum { return p.layout.Checksums(p.bin) }

// ReadF32 reads a small tensor of trunk.bin and widens it exactly.
func (p *Packed) ReadF32(t *safetensors.Tensor) ([]float32, error) {
	buf := make([]byte, t.Size)
	if err := storage.ReadFull(p.f, buf, t.Offset); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", p.bin, t.Name, err)
	}
	dst := make([]float32, t.NumElements())
	if err := safetensors.WidenF32(dst, buf, t.DType); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", p.bin, t.Name, err)
	}
	return dst, nil
}

// Close closes trunk.bin. A nil *Packed is closed already.
func (p *Packed) Close() error {
	if p == nil || p.f == nil {
		return nil
	}
	return p.f.Close()
}

// Verify reads every run of trunk.bin once (the layers', then the embedding's and the head's
// when the pack holds them), checks its sha256 against trunk.json and checks every lossless12
// tensor block by block (§6.11.4), without loading a model; it holds one tensor at a time. It
// returns every problem found, joined (each a *LayerError wrapping ErrChecksum,
// lossless12.ErrMalformed or ErrLayout and naming the run and tensor; the embedding's and the
// head's have Layer Embed and Head); progress, if not nil, receives the bytes read and the total.
func (p *Packed) Verify(progress func(done, total int64)) error {
	var total, done int64
	runs := p.layout.Runs()
	for _, r := range runs {
		total += r.Unpadded
	}
	var errs []error
	var buf []byte
	for _, r := range runs {
		name := itemName(r.Layer)
		h := sha256.New()
		var found []error // the format's findings, reported when the bytes are the ones packed
		ts := slices.Clone(r.Tensors)
		slices.SortFunc(ts, func(a, b RunTensor) int { return cmp.Compare(a.Off, b.Off) })
		var pos int64
		for _, t := range append(ts, RunTensor{Off: r.Unpadded}) {
			// The gap before the tensor (alignment padding), then the tensor.
			for _, span := range [][2]int64{{pos, t.Off - pos}, {t.Off, t.NBytes}} {
				if span[1] <= 0 {
					continue
				}
				if int64(cap(buf)) < span[1] {
					buf = make([]byte, span[1])
				}
				b := buf[:span[1]]
				if err := storage.ReadFull(p.f, b, r.FileOff+span[0]); err != nil {
					return fmt.Errorf("%s: %s: %w", p.bin, name, err)
				}
				h.Write(b)
				done += span[1]
				if progress != nil {
					progress(done, total)
				}
			}
			pos = max(pos, t.Off+t.NBytes)
			if t.Format != FormatLossless12 {
				continue
			}
			m, err := lossless12.Open(buf[:t.NBytes])
			if err != nil {
				found = append(found, &LayerError{r.Layer, fmt.Errorf("%s: %s: %w", name, t.Name, err)})
				continue
			}
			if hd := m.Header(); int64(hd.Rows) != t.Shape[0] || int64(hd.Cols) != t.Shape[1] || hd.Escapes != t.Escapes {
				found = append(found, &LayerError{r.Layer, fmt.Errorf("%w: %s: %s: its header disagrees with trunk.json", ErrLayout, name, t.Name)})
			}
		}
		if got := h.Sum(nil); r.SHA256 != nil && !bytes.Equal(got, r.SHA256) {
			errs = append(errs, &LayerError{r.Layer, fmt.Errorf("%w: %s of %s: sha256 %x, trunk.json says %x", ErrChecksum, name, p.bin, got, r.SHA256)})
			continue // the blocks of changed bytes say nothing more
		}
		errs = append(errs, found...)
	}
	return errors.Join(errs...)
}
