package rans

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
	"github.com/k3-project/k3/safetensors"
)

// FormatsKey is the informative companion of quant.StampKey (§6.8): a
// sorted JSON array of the format names a shard's stamp uses.
const FormatsKey = "colibri.container.formats"

// ErrUnstamped reports a tensor that looks like a CFS1 record (a 1-D U8
// tensor starting with the magic) but carries no stamp. A coded tensor must
// be stamped: nothing is ever guessed to be compressed, so such a tensor is
// refused rather than decoded or read as raw weights.
var ErrUnstamped = errors.New("rans: tensor looks like a CFS1 record but is not stamped")

// ErrBadCoded reports a tensor stamped with a CFS1 weight format whose
// stored form is not a 1-D U8 record.
var ErrBadCoded = errors.New("rans: coded tensor is not a 1-D U8 record")

// Stored says how one tensor is stored.
type Stored struct {
	// Coded is true for a tensor stamped with a CFS1 weight container.
	Coded bool
	// Format is the stamped container (mxfp4-cfs1, int4-row-cfs1,
	// int4-grouped-cfs1) and Base its weight format; both zero when raw.
	Format, Base quant.Format
	// DecodedLen is the byte count after decoding (the slot size); for a
	// raw tensor, its size.
	DecodedLen int
	// RecordLen is the stored byte count (the read size).
	RecordLen int64
}

// Inspect classifies tensor t of ck under the checkpoint's stamps (from
// quant.LoadStamps(ck.Metadata())). A stamped CFS1 weight must be a 1-D U8
// tensor whose record header (its first 9 bytes, read here) is valid; the
// decoded length comes from that header. A tensor stamped with a scale
// container or an unknown name is refused as quant does. An unstamped tensor
// is raw, unless it looks like a record (ErrUnstamped).
func Inspect(ck *safetensors.Checkpoint, stamps *quant.Stamps, t *safetensors.Tensor) (Stored, error) {
	st := Stored{DecodedLen: int(t.Size), RecordLen: t.Size}
	name, _, ok := stamps.Lookup(t.Name)
	if !ok {
		if looksCoded(ck, t) {
			return Stored{}, fmt.Errorf("%w: %s", ErrUnstamped, t)
		}
		return st, nil
	}
	f, err := quant.ParseFormat(name)
	if err != nil {
		return Stored{}, &quant.ErrStampUnknown{Tensor: t.Name, Stamped: name, Inferred: "a stored tensor"}
	}
	if !f.Coded() {
		return st, nil
	}
	if f == quant.MXFP4ScaleCFS1 || f == quant.Int4Rans256G0 {
		return Stored{}, &quant.CodedError{Tensor: t.Name, Format: name}
	}
	if t.DType != safetensors.U8 || len(t.Shape) != 1 {
		return Stored{}, fmt.Errorf("%w: %s stamped %s", ErrBadCoded, t, name)
	}
	var head [headerLen]byte
	if t.Size < headerLen {
		return Stored{}, fmt.Errorf("rans: %s: %w", t, corrupt("record is %d bytes, shorter than the header", t.Size))
	}
	if err := ck.ReadAt(t, head[:], 0); err != nil {
		return Stored{}, fmt.Errorf("rans: %w", err)
	}
	mode, n, err := headOnly(head[:], t.Size)
	if err != nil {
		return Stored{}, fmt.Errorf("rans: %s: %w", t, err)
	}
	_ = mode
	return Stored{Coded: true, Format: f, Base: f.Base(), DecodedLen: n, RecordLen: t.Size}, nil
}

// headOnly checks a record header given only its first 9 bytes and the
// record's full length.
func headOnly(head []byte, size int64) (byte, int, error) {
	if string(head[:4]) != cfs1.Magic {
		return 0, 0, corrupt("bad magic %q", head[:4])
	}
	mode := head[4]
	n := int(uint32(head[5]) | uint32(head[6])<<8 | uint32(head[7])<<16 | uint32(head[8])<<24)
	switch mode {
	case cfs1.ModeRaw:
		if size != int64(headerLen+n) {
			return 0, 0, corrupt("raw record of %d bytes declares %d", size, n)
		}
	case cfs1.ModeNibble:
		if n == 0 || size < headerLen+2*16+8 {
			return 0, 0, corrupt("coded record of %d bytes declaring %d is too short", size, n)
		}
	default:
		return 0, 0, corrupt("mode %d is not a weight record (want 0 or 1)", mode)
	}
	return mode, n, nil
}

func looksCoded(ck *safetensors.Checkpoint, t *safetensors.Tensor) bool {
	if t.DType != safetensors.U8 || len(t.Shape) != 1 || t.Size < headerLen {
		return false
	}
	var m [4]byte
	return ck.ReadAt(t, m[:], 0) == nil && string(m[:]) == cfs1.Magic
}

// Metadata returns meta (a shard's __metadata__, not modified) with
// quant.StampKey and FormatsKey set to cover the shard's existing stamps
// plus coded (tensor → format name). A tensor already stamped differently is
// refused, as is a stamp exceeding quant.MaxStampEntries entries.
func Metadata(shard string, meta map[string]string, coded map[string]string) (map[string]string, error) {
	stamps := map[string]string{}
	if text, ok := meta[quant.StampKey]; ok {
		m, err := quant.ParseStamp(shard, text)
		if err != nil {
			return nil, fmt.Errorf("rans: %w", err)
		}
		stamps = m
	}
	for k, v := range coded {
		if old, ok := stamps[k]; ok && old != v {
			return nil, fmt.Errorf("rans: shard %s: tensor %q is already stamped %q, cannot stamp %q", shard, k, old, v)
		}
		stamps[k] = v
	}
	if len(stamps) > quant.MaxStampEntries {
		return nil, fmt.Errorf("rans: shard %s: %d stamps exceed the %d a shard may hold", shard, len(stamps), quant.MaxStampEntries)
	}
	out := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	if len(stamps) == 0 {
		return out, nil
	}
	var formats []string
	for _, v := range stamps {
		if !slices.Contains(formats, v) {
			formats = append(formats, v)
		}
	}
	slices.Sort(formats)
	// encoding/json sorts map keys and writes compact separators: the
	// canonical form §6.8 asks for.
	sb, err := compactJSON(stamps)
	if err != nil {
		return nil, err
	}
	fb, err := compactJSON(formats)
	if err != nil {
		return nil, err
	}
	out[quant.StampKey] = sb
	out[FormatsKey] = fb
	return out, nil
}

// compactJSON is json.Marshal without HTML escaping, so a name holding <, >
// or & is written as itself.
func compactJSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("rans: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// DecodeTensor decodes coded tensor t of ck (classified by Inspect as st)
// into dst, which must be st.DecodedLen bytes. The record is read through
// the checkpoint's shared mapping (no copy); a store that reads records
// with direct I/O instead passes them to DecodeInto itself.
func (d *Decoder) DecodeTensor(ck *safetensors.Checkpoint, t *safetensors.Tensor, st Stored, dst []byte) error {
	if !st.Coded {
		return fmt.Errorf("rans: tensor %q is not coded", t.Name)
	}
	rec, err := ck.Bytes(t)
	if err != nil {
		return fmt.Errorf("rans: %w", err)
	}
	if err := d.DecodeInto(dst, rec); err != nil {
		return fmt.Errorf("rans: tensor %q: %w", t.Name, err)
	}
	return nil
}
