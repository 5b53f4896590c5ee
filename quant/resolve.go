package quant

import (
	"fmt"
	"strings"

	"github.com/k3-project/k3/quant/lossless12"
)

// TensorDesc is what Resolve needs of a stored tensor: its dtype as the
// safetensors name ("U8", "F32", "F8_E4M3", "F8_E8M0", ...) and its byte
// length.
type TensorDesc struct {
	DType  string
	NBytes int64
}

// inference is the outcome of byte arithmetic (§6.7 steps 2–7) before a
// stamp is consulted.
type inference struct {
	cands []Format // live candidates a stamp may pick among
	def   Format   // the result without a stamp, when defErr is nil
	// defErr refuses the tensor when no stamp picks a candidate (the
	// UE8M0-or-int8 case), and is the answer for any stamp that is not a
	// candidate: a stamp never grants a decoder.
	defErr error
	gs     int
}

func (in inference) names() string {
	if len(in.cands) == 0 {
		if in.defErr != nil {
			return ""
		}
		return in.def.String()
	}
	s := make([]string, len(in.cands))
	for i, f := range in.cands {
		s[i] = f.String()
	}
	return strings.Join(s, " or ")
}

// Resolve decides the format of tensor name from its logical shape [O, I]
// (which comes from the model configuration, never from the file), its
// weight and optional scale tensors, and its metadata stamp ("" when
// unstamped), following §6.7 and the verification of §6.8:
//
//  1. A stamp naming an entropy-coded format: the record must be decoded
//     first, which needs its bytes, so Resolve returns a *CodedError and the
//     caller uses ResolveCoded (or DecodeScaleRecord for a scale tensor);
//     int4-rans256-g0, whose optional decoder this build lacks, is refused
//     with a NotImplementedError. A stamp naming lossless12 (§6.11) is
//     settled here too: a U8 weight without a scale tensor whose byte count
//     is a lossless12 layout of [O, I] resolves, with its escape bytes per
//     row as the second result; other bytes are *ErrStampMismatch (and an
//     unstamped lossless12 tensor fails step 2).
//  2. Without a scale tensor: F32 with 4·O·I bytes is f32, BF16 / F16 with
//     2·O·I bytes are bf16 / f16.
//  3. Weight dtype gate: F8_E4M3 admits only fp8-e4m3-b128; I8/U8 admit every
//     byte family.
//  4. Family from the weight bytes, in this order: O·I → int8-row or
//     fp8-e4m3-b128; O·⌈I/2⌉ → int4-row, int4-grouped or mxfp4; O·⌈I/4⌉ →
//     int2-row (reserved, refused); 24·O·⌈I/64⌉ → int3-g64 (reserved, refused).
//  5. In the 4-bit family the scale dtype decides: U8/F8_E8M0 → mxfp4;
//     F32 → int4-row (4·O bytes) or int4-grouped with the finest gs whose
//     4·O·⌈I/gs⌉ matches.
//  6. int8-row against fp8-e4m3-b128 by scale bytes (see the package tests
//     for each collision class); the collision O = ⌈O/128⌉·⌈I/128⌉ resolves to
//     int8-row unless stamped fp8-e4m3-b128, UE8M0 block scales are refused.
//  7. The scale byte count equals the chosen format's expectation exactly.
//
// The stamp then only verifies or breaks a tie: an unknown name yields
// *ErrStampUnknown, a known name the bytes do not admit *ErrStampMismatch,
// and nothing a stamp says turns a refusal into a format. gs is the
// int4-grouped group size and 0 for other formats. Every error names the
// tensor and carries the observed and expected numbers.
func Resolve(name string, O, I int, weight TensorDesc, scale *TensorDesc, stamp string) (Format, int, error) {
	var sf Format
	stamped := stamp != ""
	if stamped {
		f, err := ParseFormat(stamp)
		if err != nil {
			return 0, 0, &ErrStampUnknown{Tensor: name, Stamped: stamp, Inferred: inferredNames(name, O, I, weight, scale)}
		}
		sf = f
		switch {
		case sf == Int4Rans256G0:
			return 0, 0, &NotImplementedError{Tensor: name, Format: stamp,
				Reason: "the optional int4-rans256-g0 decoder is not in this build"}
		case sf == MXFP4ScaleCFS1:
			// A scale encoding cannot describe a weight tensor.
			return 0, 0, &ErrStampMismatch{Tensor: name, Stamped: stamp, Inferred: inferredNames(name, O, I, weight, scale)}
		case sf.Coded():
			// Step 1 needs the record itself (ResolveCoded,
			// DecodeScaleRecord); byte counts cannot resolve it.
			return 0, 0, &CodedError{Tensor: name, Format: stamp}
		case sf == Lossless12:
			return resolveLossless12(name, O, I, weight, scale, stamp)
		}
	}
	in, err := infer(name, O, I, weight, scale)
	if err != nil {
		return 0, 0, err
	}
	if !stamped {
		if in.defErr != nil {
			return 0, 0, in.defErr
		}
		return in.def, in.gs, nil
	}
	for _, c := range in.cands {
		if c == sf {
			return sf, gsFor(sf, in.gs), nil
		}
	}
	if in.defErr != nil {
		return 0, 0, in.defErr
	}
	if len(in.cands) == 0 && sf == in.def {
		return sf, in.gs, nil
	}
	return 0, 0, &ErrStampMismatch{Tensor: name, Stamped: stamp, Inferred: in.names()}
}

// resolveLossless12 checks a tensor stamped lossless12 (§6.11): a U8 weight
// without a scale tensor whose length is the header plus O rows of one
// exact width, which gives the escape bytes per row (returned in the gs
// position, as WeightBytes takes them). Bytes of another size or dtype
// disagree with the stamp. The header and every block are checked when the
// matrix is built (New).
func resolveLossless12(name string, O, I int, w TensorDesc, s *TensorDesc, stamp string) (Format, int, error) {
	if O <= 0 || I <= 0 || O >= lossless12.MaxDim || I >= lossless12.MaxDim {
		return 0, 0, fmt.Errorf("%w: tensor %q: logical shape [%d, %d]", ErrShape, name, O, I)
	}
	if s == nil && w.DType == "U8" {
		if e, ok := lossless12.EscapesForSize(O, I, w.NBytes); ok {
			return Lossless12, e, nil
		}
	}
	inferred := inferredNames(name, O, I, w, s)
	if inferred == "" {
		inferred = fmt.Sprintf("no lossless12 layout for [%d,%d] (%s, %d bytes)", O, I, w.DType, w.NBytes)
	}
	return 0, 0, &ErrStampMismatch{Tensor: name, Stamped: stamp, Inferred: inferred}
}

// inferredNames is what byte arithmetic alone says, for error messages: the
// format name(s), or "" when the bytes do not resolve.
func inferredNames(name string, O, I int, w TensorDesc, s *TensorDesc) string {
	in, err := infer(name, O, I, w, s)
	if err != nil {
		return ""
	}
	return in.names()
}

func gsFor(f Format, gs int) int {
	if f == Int4Grouped {
		return gs
	}
	return 0
}

func isByteDType(dt string) bool     { return dt == "U8" || dt == "I8" }
func isE8M0DType(dt string) bool     { return dt == "U8" || dt == "F8_E8M0" }
func unambiguous(f Format) inference { return inference{def: f} }

// infer runs §6.7 steps 2–7 without the stamp.
func infer(name string, O, I int, w TensorDesc, s *TensorDesc) (inference, error) {
	if O <= 0 || I <= 0 || O > 1<<40 || I > 1<<40 || int64(O) > (1<<50)/int64(I) {
		return inference{}, fmt.Errorf("%w: tensor %q: logical shape [%d, %d]", ErrShape, name, O, I)
	}
	if w.NBytes < 0 || (s != nil && s.NBytes < 0) {
		return inference{}, fmt.Errorf("%w: tensor %q: negative byte count", ErrShape, name)
	}
	o, i, nb := int64(O), int64(I), w.NBytes

	// Step 2: a lone tensor is a plain format.
	if s == nil {
		var f Format
		var want int64
		switch w.DType {
		case "F32":
			f, want = F32, 4*o*i
		case "BF16":
			f, want = BF16, 2*o*i
		case "F16":
			f, want = F16, 2*o*i
		default:
			return inference{}, &DTypeError{Tensor: name, Role: "weight", DType: w.DType,
				Allowed: []string{"F32", "BF16", "F16"}, Detail: "a weight without a scale tensor must be a plain float format"}
		}
		if nb != want {
			return inference{}, &WeightSizeError{Tensor: name, DType: w.DType, Got: nb, Rows: O, Cols: I,
				Want: []LayoutSize{{f.String(), want}}}
		}
		return unambiguous(f), nil
	}

	// Step 3: weight dtype gate.
	fp8Only := false
	switch {
	case w.DType == "F8_E4M3":
		fp8Only = true
	case isByteDType(w.DType):
	default:
		return inference{}, &DTypeError{Tensor: name, Role: "weight", DType: w.DType,
			Allowed: []string{"U8", "I8", "F8_E4M3"}, Detail: "a weight with a scale tensor must hold packed bytes"}
	}

	// Step 4: family from the weight bytes, fixed precedence.
	byteN, halfN := o*i, o*ceilDiv(i, 2)
	quarterN, int3N := o*ceilDiv(i, 4), 24*o*ceilDiv(i, 64)
	if fp8Only {
		if nb != byteN {
			return inference{}, &WeightSizeError{Tensor: name, DType: w.DType, Got: nb, Rows: O, Cols: I,
				Want: []LayoutSize{{FP8E4M3B128.String(), byteN}}}
		}
		return inferByte(name, O, I, true, s)
	}
	switch nb {
	case byteN:
		return inferByte(name, O, I, false, s)
	case halfN:
		return infer4(name, O, I, s)
	case quarterN:
		return inference{}, &NotImplementedError{Tensor: name, Format: Int2Row.String(),
			Reason: fmt.Sprintf("weight is %d bytes = O·⌈I/4⌉ for [%d,%d]; the name is reserved, not implemented", nb, O, I)}
	case int3N:
		return inference{}, &NotImplementedError{Tensor: name, Format: Int3G64.String(),
			Reason: fmt.Sprintf("weight is %d bytes = 24·O·⌈I/64⌉ for [%d,%d]; the name is reserved, not implemented", nb, O, I)}
	}
	return inference{}, &WeightSizeError{Tensor: name, DType: w.DType, Got: nb, Rows: O, Cols: I, Want: []LayoutSize{
		{"int8-row/fp8-e4m3-b128 (O·I)", byteN}, {"int4-row/int4-grouped/mxfp4 (O·⌈I/2⌉)", halfN},
		{"int2-row (O·⌈I/4⌉)", quarterN}, {"int3-g64 (24·O·⌈I/64⌉)", int3N}}}
}

// infer4 is step 5: the scale dtype decides inside the 4-bit family.
func infer4(name string, O, I int, s *TensorDesc) (inference, error) {
	o, i, ns := int64(O), int64(I), s.NBytes
	switch {
	case isE8M0DType(s.DType):
		if I%32 != 0 {
			return inference{}, fmt.Errorf("%w: tensor %q: mxfp4 (E8M0 scales, %s) needs I %% 32 == 0, got I = %d",
				ErrShape, name, s.DType, I)
		}
		if want := o * i / 32; ns != want {
			return inference{}, &ScaleSizeError{Tensor: name, Family: MXFP4.String(), DType: s.DType, Got: ns,
				Rows: O, Cols: I, Want: []LayoutSize{{"mxfp4 (O·I/32)", want}}}
		}
		return finalCheck(name, O, I, unambiguous(MXFP4), s)
	case s.DType == "F32":
		if ns == 4*o {
			return finalCheck(name, O, I, unambiguous(Int4Row), s)
		}
		if ns > 4*o {
			for _, gs := range groupSizes {
				if ns == 4*o*ceilDiv(i, int64(gs)) {
					in := unambiguous(Int4Grouped)
					in.gs = gs
					return finalCheck(name, O, I, in, s)
				}
			}
		}
		want := []LayoutSize{{"int4-row (4·O)", 4 * o}}
		for _, gs := range groupSizes {
			want = append(want, LayoutSize{fmt.Sprintf("int4-grouped gs=%d", gs), 4 * o * ceilDiv(i, int64(gs))})
		}
		return inference{}, &ScaleSizeError{Tensor: name, Family: "int4-row/int4-grouped", DType: s.DType, Got: ns,
			Rows: O, Cols: I, Want: want}
	}
	return inference{}, &DTypeError{Tensor: name, Role: "scale", DType: s.DType,
		Allowed: []string{"U8", "F8_E8M0", "F32"}, Detail: "4-bit weights take E8M0 (mxfp4) or F32 (int4) scales"}
}

// inferByte is step 6: int8-row against fp8-e4m3-b128 on identical weight
// bytes.
func inferByte(name string, O, I int, fp8Only bool, s *TensorDesc) (inference, error) {
	o, i, ns := int64(O), int64(I), s.NBytes
	nblk := ceilDiv(o, FP8Block) * ceilDiv(i, FP8Block)
	row := ns == 4*o
	blk := ns == 4*nblk
	ue := ns == nblk && isE8M0DType(s.DType)
	want := []LayoutSize{{"int8-row F32 (4·O)", 4 * o}, {"fp8-e4m3-b128 F32 (4·⌈O/128⌉·⌈I/128⌉)", 4 * nblk}}
	if fp8Only {
		want = want[1:]
	}
	ueErr := func() error {
		reason := fmt.Sprintf("fp8 with UE8M0 block scales recognised (%d scale bytes = ⌈O/128⌉·⌈I/128⌉, %s), not implemented",
			ns, s.DType)
		if row && !fp8Only {
			reason += "; scale array also matches per-row int8 (4·O bytes): stamp int8-row to read it so"
		}
		return &NotImplementedError{Tensor: name, Format: FP8E4M3B128.String() + " (UE8M0 scales)", Reason: reason}
	}
	needF32 := func(in inference) (inference, error) {
		if s.DType != "F32" {
			return inference{}, &DTypeError{Tensor: name, Role: "scale", DType: s.DType, Allowed: []string{"F32"},
				Detail: fmt.Sprintf("%s takes F32 scales", in.names())}
		}
		return finalCheck(name, O, I, in, s)
	}
	switch {
	case row && blk:
		if fp8Only {
			return needF32(unambiguous(FP8E4M3B128))
		}
		// The collision (O == ⌈O/128⌉·⌈I/128⌉): the bytes cannot tell; a
		// stamp picks, and unstamped tensors are int8-row.
		return needF32(inference{cands: []Format{Int8Row, FP8E4M3B128}, def: Int8Row})
	case ue:
		if row && !fp8Only {
			// Only a stamp int8-row reads these bytes; unstamped, they are
			// refused as UE8M0 fp8.
			return inference{cands: []Format{Int8Row}, defErr: ueErr()}, nil
		}
		return inference{}, ueErr()
	case blk:
		return needF32(unambiguous(FP8E4M3B128))
	case row:
		if fp8Only {
			return inference{}, &ScaleSizeError{Tensor: name, Family: FP8E4M3B128.String(), DType: s.DType, Got: ns,
				Rows: O, Cols: I, Want: want, Detail: "F8_E4M3 weights with per-row (4·O) scales; fp8 needs block scales"}
		}
		return needF32(unambiguous(Int8Row))
	}
	return inference{}, &ScaleSizeError{Tensor: name, Family: "int8-row/fp8-e4m3-b128", DType: s.DType, Got: ns,
		Rows: O, Cols: I, Want: want}
}

// finalCheck is step 7: the scale bytes equal every remaining candidate's
// expected-bytes function exactly.
func finalCheck(name string, O, I int, in inference, s *TensorDesc) (inference, error) {
	fs := in.cands
	if len(fs) == 0 {
		fs = []Format{in.def}
	}
	for _, f := range fs {
		want, err := ScaleBytes(f, O, I, gsFor(f, in.gs))
		if err != nil {
			return inference{}, fmt.Errorf("tensor %q: %w", name, err)
		}
		if s.NBytes != want {
			return inference{}, &ScaleSizeError{Tensor: name, Family: f.String(), DType: s.DType, Got: s.NBytes,
				Rows: O, Cols: I, Want: []LayoutSize{{f.String(), want}}}
		}
	}
	return in, nil
}
