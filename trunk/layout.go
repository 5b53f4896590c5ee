package trunk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/k3-project/k3/internal/fileio/strictjson"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// File names of a packed trunk (§8.1, §8.2).
const (
	BinName    = "trunk.bin"
	LayoutName = "trunk.json"
	// maxLayoutBytes bounds trunk.json: the real model's is about 0.3 MB.
	maxLayoutBytes = 64 << 20
)

// Layout is a parsed and validated trunk.json.
type Layout struct {
	NumLayers int
	Align     int64
	Layers    []LayerRun
	// Embedding and Head are the runs of the embedding table and the output head, when the
	// pack holds them (trunk.json's optional "embedding" and "head", §8.2; their Layer is Embed
	// or Head). A trunk.json without them leaves both nil: the checkpoint's shards provide them.
	Embedding, Head *LayerRun
	// Buffered is set when align is not 4096: the runs cannot be read with O_DIRECT, and the
	// caller should read trunk.bin buffered and warn (§8.3).
	Buffered bool
	// Model is the identity (§3.6) of the checkpoint packed, as hex; "" when trunk.json has none.
	Model string
}

// LayerRun is one layer's run in trunk.bin.
type LayerRun struct {
	Layer    int
	Shard    string // the shard the run was copied from ("" when gathered from several)
	RunStart int64
	NBytes   int64 // padded run length, a multiple of 4096
	FileOff  int64
	SHA256   []byte // of the unpadded run; nil when the writer gave none
	Unpadded int64  // hi − lo: the end of the last tensor
	Tensors  []RunTensor
}

// RunTensor is one tensor of a run; Off is relative to the run's start.
type RunTensor struct {
	Name   string
	Off    int64
	NBytes int64
	DType  string
	Shape  []int64
	// Format is the tensor's encoding as trunk.json's optional "format" names it (§8.2):
	// "" (absent: the dtype's raw bytes, as every older trunk.json), FormatBF16 (raw bf16 bytes
	// a lossless12 pack kept because encoding them would not save bytes) or FormatLossless12
	// (dtype U8, shape the [rows, cols] of the bf16 matrix, NBytes the whole encoded matrix,
	// header included, and Escapes its escape bytes per row, §6.11).
	Format  string
	Escapes int
}

// Values of trunk.json's per-tensor "format" field.
const (
	FormatBF16       = "bf16"
	FormatLossless12 = "lossless12"
)

// Expect lets the caller check a layer's tensors against the model configuration: it is called
// for every tensor (name, dtype, shape) and once per layer with the names present (to require
// the ones the layer needs). Either returning an error refuses the trunk. Tensor is also called
// for the embedding table and the output head of a pack that holds them, with layer Embed or
// Head.
type Expect struct {
	Tensor func(layer int, t RunTensor) error
	Layer  func(layer int, names []string) error
	// Model, when set, is the opened model's identity (§3.6) as hex: a trunk.json naming
	// another model, or none, is refused (ErrOtherModel).
	Model string
}

// allowedDType is the dtype set of §8.2; I8R (a draft trunk's int8 rows) is refused by
// name because an exact model must never run on it.
func allowedDType(d string) (safetensors.DType, error) {
	switch d {
	case "BF16", "F32", "F16", "U8":
		dt, _ := safetensors.ParseDType(d)
		return dt, nil
	case "I8R":
		return 0, errors.New("I8R is a draft trunk's int8 row format, refused by the exact model")
	}
	return 0, fmt.Errorf("dtype %q is not one of BF16, F32, F16, U8", d)
}

// ReadLayout reads dir/trunk.json and validates it against dir/trunk.bin, numLayers and exp
// (§8.3). Any failure refuses the whole trunk with an error wrapping ErrLayout (or
// ErrIncomplete when trunk.json is absent but trunk.bin or a partial pack is there).
func ReadLayout(dir string, numLayers int, exp Expect) (*Layout, error) {
	path := filepath.Join(dir, LayoutName)
	f, err := storage.Open(path) // never blocks on a FIFO
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, e := os.Stat(filepath.Join(dir, BinName)); e == nil {
				return nil, fmt.Errorf("%w: %s has %s but no %s (an interrupted pack?)", ErrIncomplete, dir, BinName, LayoutName)
			}
		}
		return nil, fmt.Errorf("trunk: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxLayoutBytes+1))
	if err != nil {
		return nil, fmt.Errorf("trunk: read %s: %w", path, err)
	}
	if len(data) > maxLayoutBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrLayout, path, maxLayoutBytes)
	}
	st, err := os.Stat(filepath.Join(dir, BinName))
	if err != nil {
		return nil, fmt.Errorf("trunk: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrLayout, BinName)
	}
	l, err := ParseLayout(data, st.Size(), numLayers, exp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

func layoutErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrLayout}, a...)...)
}

// ParseLayout validates trunk.json's bytes; binSize is trunk.bin's size.
func ParseLayout(data []byte, binSize int64, numLayers int, exp Expect) (*Layout, error) {
	v, err := strictjson.ParseLimits(data, strictjson.Limits{MaxBytes: maxLayoutBytes, MaxDepth: 16})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLayout, err)
	}
	if v.Kind() != strictjson.Object {
		return nil, layoutErr("top level is %v, want an object", v.Kind())
	}
	l := &Layout{}
	if l.NumLayers, err = intField(v, "n_layers"); err != nil {
		return nil, err
	}
	if l.Align, err = int64Field(v, "align"); err != nil {
		return nil, err
	}
	if l.Align != storage.Alignment {
		l.Buffered = true
		if l.Align <= 0 {
			return nil, layoutErr("align %d", l.Align)
		}
	}
	if l.NumLayers != numLayers {
		return nil, layoutErr("n_layers %d, the model has %d", l.NumLayers, numLayers)
	}
	if l.Model, err = parseModel(v); err != nil {
		return nil, err
	}
	if err := checkModel(l.Model, exp.Model); err != nil {
		return nil, err
	}
	layers := v.Get("layers")
	if layers == nil || layers.Kind() != strictjson.Array {
		return nil, layoutErr("layers missing or not an array")
	}
	if layers.Len() != l.NumLayers {
		return nil, layoutErr("%d layers listed, n_layers is %d", layers.Len(), l.NumLayers)
	}
	var prevEnd int64
	for i, lv := range layers.Items() {
		r, err := parseRun(lv, i, binSize, exp)
		if err != nil {
			return nil, err
		}
		if r.FileOff < prevEnd {
			return nil, layoutErr("layer %d: file_off %d overlaps or precedes the previous run (ends at %d)", i, r.FileOff, prevEnd)
		}
		prevEnd = r.FileOff + r.NBytes
		l.Layers = append(l.Layers, *r)
	}
	if err := parseModelRuns(v, l, prevEnd, binSize, exp); err != nil {
		return nil, err
	}
	return l, nil
}

func parseRun(lv *strictjson.Value, i int, binSize int64, exp Expect) (*LayerRun, error) {
	if lv.Kind() != strictjson.Object {
		return nil, layoutErr("layers[%d] is %v, want an object", i, lv.Kind())
	}
	r := &LayerRun{}
	var err error
	if r.Layer, err = intField(lv, "layer"); err != nil {
		return nil, fmt.Errorf("layers[%d]: %w", i, err)
	}
	if r.Layer != i {
		return nil, layoutErr("layers[%d].layer is %d", i, r.Layer)
	}
	if r.Shard, err = strField(lv, "shard"); err != nil {
		return nil, fmt.Errorf("layer %d: %w", i, err)
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"run_start", &r.RunStart}, {"nbytes", &r.NBytes}, {"file_off", &r.FileOff}} {
		if *f.dst, err = int64Field(lv, f.key); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if *f.dst < 0 {
			return nil, layoutErr("layer %d: %s %d is negative", i, f.key, *f.dst)
		}
	}
	if r.FileOff%storage.Alignment != 0 || r.NBytes%storage.Alignment != 0 {
		return nil, layoutErr("layer %d: file_off %d and nbytes %d must be multiples of 4096", i, r.FileOff, r.NBytes)
	}
	if r.FileOff > binSize || r.NBytes > binSize-r.FileOff {
		return nil, layoutErr("layer %d: run [%d, +%d) ends past trunk.bin (%d bytes)", i, r.FileOff, r.NBytes, binSize)
	}
	if sv := lv.Get("sha256"); sv != nil {
		s, err := sv.Str()
		if err != nil {
			return nil, layoutErr("layer %d: sha256: %v", i, err)
		}
		if r.SHA256, err = hex.DecodeString(s); err != nil || len(r.SHA256) != 32 {
			return nil, layoutErr("layer %d: sha256 %q is not 64 hex digits", i, s)
		}
	}
	tv := lv.Get("tensors")
	if tv == nil || tv.Kind() != strictjson.Object {
		return nil, layoutErr("layer %d: tensors missing or not an object", i)
	}
	prefix := "layers." + strconv.Itoa(i) + "."
	var names []string
	for _, m := range tv.Members() {
		t, err := parseRunTensor(m, itemName(i))
		if err != nil {
			return nil, err
		}
		if !bytes.Contains([]byte(t.Name), []byte(prefix)) {
			return nil, layoutErr("layer %d: tensor %s does not belong to the layer", i, t.Name)
		}
		if bytes.Contains([]byte(t.Name), []byte(".experts.")) {
			return nil, layoutErr("layer %d: tensor %s is a routed expert, never part of the trunk", i, t.Name)
		}
		if t.Off > r.NBytes || t.NBytes > r.NBytes-t.Off {
			return nil, layoutErr("layer %d: %s [%d, +%d) ends past the run (%d bytes)", i, t.Name, t.Off, t.NBytes, r.NBytes)
		}
		if exp.Tensor != nil {
			if err := exp.Tensor(i, t); err != nil {
				return nil, layoutErr("layer %d: %s: %v", i, t.Name, err)
			}
		}
		r.Tensors = append(r.Tensors, t)
		names = append(names, t.Name)
		r.Unpadded = max(r.Unpadded, t.Off+t.NBytes)
	}
	if len(r.Tensors) == 0 {
		return nil, layoutErr("layer %d has no tensors", i)
	}
	spans := slices.Clone(r.Tensors)
	slices.SortFunc(spans, func(a, b RunTensor) int { return int(a.Off - b.Off) })
	for k := 1; k < len(spans); k++ {
		if spans[k].Off < spans[k-1].Off+spans[k-1].NBytes {
			return nil, layoutErr("layer %d: %s and %s overlap", i, spans[k-1].Name, spans[k].Name)
		}
	}
	if exp.Layer != nil {
		if err := exp.Layer(i, names); err != nil {
			return nil, layoutErr("layer %d: %v", i, err)
		}
	}
	return r, nil
}

func parseRunTensor(m strictjson.Member, where string) (RunTensor, error) {
	t := RunTensor{Name: m.Key}
	v := m.Value
	if v.Kind() != strictjson.Object {
		return t, layoutErr("%s: %s is %v, want an object", where, t.Name, v.Kind())
	}
	var err error
	if t.Off, err = int64Field(v, "off"); err != nil {
		return t, fmt.Errorf("%s: %s: %w", where, t.Name, err)
	}
	if t.NBytes, err = int64Field(v, "nbytes"); err != nil {
		return t, fmt.Errorf("%s: %s: %w", where, t.Name, err)
	}
	if t.Off < 0 || t.NBytes < 0 {
		return t, layoutErr("%s: %s: negative off %d or nbytes %d", where, t.Name, t.Off, t.NBytes)
	}
	if t.DType, err = strField(v, "dtype"); err != nil {
		return t, fmt.Errorf("%s: %s: %w", where, t.Name, err)
	}
	dt, err := allowedDType(t.DType)
	if err != nil {
		return t, layoutErr("%s: %s: %v", where, t.Name, err)
	}
	sv := v.Get("shape")
	if sv == nil || sv.Kind() != strictjson.Array || sv.Len() > 8 {
		return t, layoutErr("%s: %s: shape missing, not an array or more than 8 dimensions", where, t.Name)
	}
	numel := int64(1)
	for _, d := range sv.Items() {
		n, err := d.Int64()
		if err != nil || n < 0 || n > 1<<40 {
			return t, layoutErr("%s: %s: bad dimension", where, t.Name)
		}
		t.Shape = append(t.Shape, n)
		numel *= n
		if numel > 1<<50 {
			return t, layoutErr("%s: %s: too many elements", where, t.Name)
		}
	}
	if err := parseFormat(v, &t); err != nil {
		return t, layoutErr("%s: %s: %v", where, t.Name, err)
	}
	if t.Format == FormatLossless12 {
		return t, nil // parseFormat checked nbytes against the shape and the escape bytes
	}
	if want := numel * int64(dt.Bits()/8); want != t.NBytes {
		return t, layoutErr("%s: %s: nbytes %d, %s %v needs %d", where, t.Name, t.NBytes, t.DType, t.Shape, want)
	}
	return t, nil
}

// parseFormat reads a tensor's optional "format" and "escapes" fields (§8.2) and checks them
// against its dtype, shape and nbytes: "escapes" belongs to lossless12 only, "bf16" to a BF16
// tensor, and a lossless12 tensor is a U8 [rows, cols] matrix exactly as long as its rows and
// escape bytes make it.
func parseFormat(v *strictjson.Value, t *RunTensor) error {
	fv, ev := v.Get("format"), v.Get("escapes")
	if fv == nil {
		if ev != nil {
			return errors.New("escapes without a format")
		}
		return nil
	}
	f, err := fv.Str()
	if err != nil {
		return fmt.Errorf("format: %v", err)
	}
	switch f {
	case FormatBF16:
		if ev != nil {
			return errors.New("escapes on a bf16 tensor")
		}
		if t.DType != "BF16" {
			return fmt.Errorf("format bf16 on a %s tensor", t.DType)
		}
	case FormatLossless12:
		if t.DType != "U8" {
			return fmt.Errorf("format lossless12 on a %s tensor, want U8", t.DType)
		}
		if len(t.Shape) != 2 || t.Shape[0] <= 0 || t.Shape[1] <= 0 || t.Shape[0] > math.MaxInt32 || t.Shape[1] > math.MaxInt32 {
			return fmt.Errorf("format lossless12 needs a [rows, cols] shape, found %v", t.Shape)
		}
		if ev == nil {
			return errors.New("format lossless12 without escapes")
		}
		e, err := ev.Int()
		if err != nil || e < 0 || e > int(t.Shape[1]) {
			return fmt.Errorf("escapes must be an integer in [0, %d]", t.Shape[1])
		}
		want, err := quant.WeightBytes(quant.Lossless12, int(t.Shape[0]), int(t.Shape[1]), e)
		if err != nil {
			return err
		}
		if want != t.NBytes {
			return fmt.Errorf("nbytes %d, lossless12 %v with %d escape bytes a row needs %d", t.NBytes, t.Shape, e, want)
		}
		t.Escapes = e
	default:
		return fmt.Errorf("format %q is not bf16 or lossless12", f)
	}
	t.Format = f
	return nil
}

func intField(v *strictjson.Value, key string) (int, error) {
	f := v.Get(key)
	if f == nil {
		return 0, layoutErr("%s is missing", key)
	}
	n, err := f.Int()
	if err != nil {
		return 0, layoutErr("%s: %v", key, err)
	}
	return n, nil
}

func int64Field(v *strictjson.Value, key string) (int64, error) {
	f := v.Get(key)
	if f == nil {
		return 0, layoutErr("%s is missing", key)
	}
	n, err := f.Int64()
	if err != nil {
		return 0, layoutErr("%s: %v", key, err)
	}
	return n, nil
}

func strField(v *strictjson.Value, key string) (string, error) {
	f := v.Get(key)
	if f == nil {
		return "", layoutErr("%s is missing", key)
	}
	s, err := f.Str()
	if err != nil {
		return "", layoutErr("%s: %v", key, err)
	}
	return s, nil
}

// Checksums returns the runs' digests for Options.Verify (runs without one are skipped).
func (l *Layout) Checksums(bin string) []Checksum {
	var out []Checksum
	for _, r := range l.Runs() {
		if r.SHA256 == nil {
			continue
		}
		c := Checksum{Item: r.Layer, File: bin, Offset: r.FileOff, Len: r.Unpadded}
		copy(c.Sum[:], r.SHA256)
		out = append(out, c)
	}
	return out
}
