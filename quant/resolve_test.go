package quant

import (
	"errors"
	"strings"
	"testing"
)

type resolveCase struct {
	name       string
	O, I       int
	w          TensorDesc
	s          *TensorDesc
	stamp      string
	want       Format
	gs         int
	err        error  // sentinel the error must match; nil = success
	errType    any    // optional pointer to the typed error expected (errors.As)
	msgContain string // optional substring of the message
}

func sd(dt string, n int64) *TensorDesc { return &TensorDesc{DType: dt, NBytes: n} }

func resolveCases() []resolveCase {
	var (
		wse *WeightSizeError
		sse *ScaleSizeError
		dte *DTypeError
		nie *NotImplementedError
		unk *ErrStampUnknown
		mis *ErrStampMismatch
		cod *CodedError
	)
	return []resolveCase{
		// Step 2: plain formats.
		{name: "f32", O: 3, I: 5, w: TensorDesc{"F32", 60}, want: F32},
		{name: "bf16", O: 3, I: 5, w: TensorDesc{"BF16", 30}, want: BF16},
		{name: "f16", O: 3, I: 5, w: TensorDesc{"F16", 30}, want: F16},
		{name: "bf16 stamped", O: 3, I: 5, w: TensorDesc{"BF16", 30}, stamp: "bf16", want: BF16},
		{name: "bf16 stamped f16", O: 3, I: 5, w: TensorDesc{"BF16", 30}, stamp: "f16", err: ErrStamp, errType: &mis},
		{name: "f32 short", O: 3, I: 5, w: TensorDesc{"F32", 56}, err: ErrWeightSize, errType: &wse, msgContain: "weight is 56 bytes"},
		{name: "u8 alone", O: 3, I: 5, w: TensorDesc{"U8", 15}, err: ErrDType, errType: &dte},
		// Step 3: weight dtype gate.
		{name: "bf16 with scales", O: 4, I: 64, w: TensorDesc{"BF16", 512}, s: sd("F32", 16), err: ErrDType, errType: &dte},
		{name: "f8 weights 4-bit bytes", O: 4, I: 64, w: TensorDesc{"F8_E4M3", 128}, s: sd("U8", 8), err: ErrWeightSize, errType: &wse},
		// Step 4: family by weight bytes; reserved formats refused by name.
		{name: "int2-row", O: 4, I: 64, w: TensorDesc{"U8", 64}, s: sd("F32", 16), err: ErrNotImplemented, errType: &nie, msgContain: "int2-row"},
		{name: "int3-g64", O: 4, I: 128, w: TensorDesc{"U8", 192}, s: sd("F32", 32), err: ErrNotImplemented, errType: &nie, msgContain: "int3-g64"},
		{name: "int2 stamped int8", O: 4, I: 64, w: TensorDesc{"U8", 64}, s: sd("F32", 16), stamp: "int8-row", err: ErrNotImplemented},
		{name: "no layout", O: 4, I: 64, w: TensorDesc{"U8", 100}, s: sd("F32", 16), err: ErrWeightSize, errType: &wse, msgContain: "no layout for [4,64]"},
		// Step 5: the scale dtype decides inside the 4-bit family.
		{name: "mxfp4 u8", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("U8", 32), want: MXFP4},
		{name: "mxfp4 e8m0", O: 4, I: 256, w: TensorDesc{"I8", 512}, s: sd("F8_E8M0", 32), want: MXFP4},
		// I % 128 == 0: O·I/32 U8 bytes == 4·O·I/128 F32 bytes.
		{name: "gs128 twin of mxfp4", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("F32", 32), want: Int4Grouped, gs: 128},
		{name: "mxfp4 stamped int4-grouped", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("U8", 32), stamp: "int4-grouped", err: ErrStamp, errType: &mis},
		{name: "mxfp4 odd width", O: 4, I: 48, w: TensorDesc{"U8", 96}, s: sd("U8", 8), err: ErrShape},
		{name: "mxfp4 short scales", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("U8", 31), err: ErrScaleSize, errType: &sse},
		{name: "int4-row", O: 4, I: 7, w: TensorDesc{"U8", 16}, s: sd("F32", 16), want: Int4Row},
		{name: "int4-grouped 16", O: 2, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 56), want: Int4Grouped, gs: 16},
		{name: "int4-grouped finest of equal", O: 2, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 16), want: Int4Grouped, gs: 64},
		{name: "int4-grouped odd I", O: 3, I: 33, w: TensorDesc{"U8", 51}, s: sd("F32", 36), want: Int4Grouped, gs: 16},
		{name: "int4 bad scales", O: 2, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 12), err: ErrScaleSize, errType: &sse},
		{name: "4-bit bf16 scales", O: 2, I: 100, w: TensorDesc{"U8", 100}, s: sd("BF16", 8), err: ErrDType, errType: &dte},
		// Step 6: int8-row against fp8-e4m3-b128.
		{name: "int8-row", O: 300, I: 200, w: TensorDesc{"I8", 60000}, s: sd("F32", 1200), want: Int8Row},
		{name: "fp8 u8", O: 300, I: 200, w: TensorDesc{"U8", 60000}, s: sd("F32", 24), want: FP8E4M3B128},
		{name: "fp8 f8", O: 300, I: 200, w: TensorDesc{"F8_E4M3", 60000}, s: sd("F32", 24), want: FP8E4M3B128},
		{name: "fp8 stamped int8", O: 300, I: 200, w: TensorDesc{"U8", 60000}, s: sd("F32", 24), stamp: "int8-row", err: ErrStamp, errType: &mis},
		{name: "f8 weights row scales", O: 300, I: 200, w: TensorDesc{"F8_E4M3", 60000}, s: sd("F32", 1200), err: ErrScaleSize, errType: &sse, msgContain: "per-row"},
		{name: "f8 weights row scales stamped int8", O: 300, I: 200, w: TensorDesc{"F8_E4M3", 60000}, s: sd("F32", 1200), stamp: "int8-row", err: ErrScaleSize},
		{name: "int8 e8m0 row scales", O: 300, I: 200, w: TensorDesc{"U8", 60000}, s: sd("F8_E8M0", 1200), err: ErrDType, errType: &dte},
		{name: "byte family bad scales", O: 300, I: 200, w: TensorDesc{"U8", 60000}, s: sd("F32", 100), err: ErrScaleSize, errType: &sse},
		// The collision O == ⌈O/128⌉·⌈I/128⌉ (O = 1, I ≤ 128).
		{name: "collision unstamped", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), want: Int8Row},
		{name: "collision int8", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), stamp: "int8-row", want: Int8Row},
		{name: "collision fp8", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), stamp: "fp8-e4m3-b128", want: FP8E4M3B128},
		{name: "collision other stamp", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), stamp: "mxfp4", err: ErrStamp, errType: &mis, msgContain: "int8-row or fp8-e4m3-b128"},
		{name: "collision reserved stamp", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), stamp: "int2-row", err: ErrStamp, errType: &mis},
		{name: "collision unknown stamp", O: 1, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 4), stamp: "fp8", err: ErrStamp, errType: &unk, msgContain: "int8-row or fp8-e4m3-b128"},
		{name: "collision f8 weights", O: 1, I: 100, w: TensorDesc{"F8_E4M3", 100}, s: sd("F32", 4), want: FP8E4M3B128},
		{name: "collision f8 weights stamped int8", O: 1, I: 100, w: TensorDesc{"F8_E4M3", 100}, s: sd("F32", 4), stamp: "int8-row", err: ErrStamp, errType: &mis},
		// GLM-5.2's o_proj [6144, 16384]: 48·128 = 6144 blocks.
		{name: "collision glm o_proj", O: 6144, I: 16384, w: TensorDesc{"U8", 6144 * 16384}, s: sd("F32", 4*6144), want: Int8Row},
		{name: "collision glm o_proj fp8", O: 6144, I: 16384, w: TensorDesc{"U8", 6144 * 16384}, s: sd("F32", 4*6144), stamp: "fp8-e4m3-b128", want: FP8E4M3B128},
		// UE8M0 block scales: recognised, refused; a stamp grants nothing.
		{name: "ue8m0", O: 256, I: 256, w: TensorDesc{"U8", 65536}, s: sd("F8_E8M0", 4), err: ErrNotImplemented, errType: &nie, msgContain: "UE8M0"},
		{name: "ue8m0 u8", O: 256, I: 256, w: TensorDesc{"F8_E4M3", 65536}, s: sd("U8", 4), err: ErrNotImplemented, msgContain: "UE8M0"},
		{name: "ue8m0 stamped fp8", O: 256, I: 256, w: TensorDesc{"U8", 65536}, s: sd("F8_E8M0", 4), stamp: "fp8-e4m3-b128", err: ErrNotImplemented},
		{name: "ue8m0 stamped int8", O: 256, I: 256, w: TensorDesc{"U8", 65536}, s: sd("F8_E8M0", 4), stamp: "int8-row", err: ErrNotImplemented},
		// ue and row both (ns = ⌈O/128⌉·⌈I/128⌉ = 4·O: O = 1, I = 512).
		{name: "ue and row unstamped", O: 1, I: 512, w: TensorDesc{"U8", 512}, s: sd("U8", 4), err: ErrNotImplemented, msgContain: "also matches per-row int8"},
		{name: "ue and row stamped int8", O: 1, I: 512, w: TensorDesc{"U8", 512}, s: sd("U8", 4), stamp: "int8-row", want: Int8Row},
		{name: "ue and row stamped fp8", O: 1, I: 512, w: TensorDesc{"U8", 512}, s: sd("U8", 4), stamp: "fp8-e4m3-b128", err: ErrNotImplemented, msgContain: "UE8M0"},
		{name: "ue and row f8 weights stamped int8", O: 1, I: 512, w: TensorDesc{"F8_E4M3", 512}, s: sd("U8", 4), stamp: "int8-row", err: ErrNotImplemented},
		// Step 1 and stamp verification.
		{name: "coded stamp", O: 4, I: 256, w: TensorDesc{"U8", 100}, s: sd("U8", 32), stamp: "mxfp4-cfs1", err: ErrCoded, errType: &cod, msgContain: "ResolveCoded"},
		{name: "coded int4 stamp", O: 4, I: 256, w: TensorDesc{"U8", 100}, s: sd("F32", 16), stamp: "int4-grouped-cfs1", err: ErrCoded, errType: &cod},
		{name: "scale-coded stamp on a weight", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("U8", 32), stamp: "mxfp4-scale-cfs1", err: ErrStamp, errType: &mis, msgContain: "bytes say mxfp4"},
		{name: "rans stamp", O: 4, I: 256, w: TensorDesc{"U8", 512}, s: sd("F32", 16), stamp: "int4-rans256-g0", err: ErrNotImplemented, errType: &nie, msgContain: "int4-rans256-g0"},
		{name: "unknown stamp", O: 4, I: 7, w: TensorDesc{"U8", 16}, s: sd("F32", 16), stamp: "int4", err: ErrStamp, errType: &unk, msgContain: `"int4"`},
		{name: "unknown stamp, bad bytes", O: 4, I: 7, w: TensorDesc{"U8", 17}, s: sd("F32", 16), stamp: "int4", err: ErrStamp, errType: &unk},
		{name: "stamp agrees int4-row", O: 4, I: 7, w: TensorDesc{"U8", 16}, s: sd("F32", 16), stamp: "int4-row", want: Int4Row},
		{name: "stamp agrees grouped", O: 2, I: 100, w: TensorDesc{"U8", 100}, s: sd("F32", 56), stamp: "int4-grouped", want: Int4Grouped, gs: 16},
		{name: "stamp disagrees", O: 4, I: 7, w: TensorDesc{"U8", 16}, s: sd("F32", 16), stamp: "int4-grouped", err: ErrStamp, errType: &mis},
		{name: "reserved stamp on int4 bytes", O: 4, I: 7, w: TensorDesc{"U8", 16}, s: sd("F32", 16), stamp: "int3-g64", err: ErrStamp, errType: &mis},
		// Shapes.
		{name: "zero rows", O: 0, I: 7, w: TensorDesc{"F32", 0}, err: ErrShape},
		{name: "negative bytes", O: 1, I: 7, w: TensorDesc{"F32", -28}, err: ErrShape},
		{name: "huge shape", O: 1 << 30, I: 1 << 30, w: TensorDesc{"F32", 0}, err: ErrShape},
	}
}

func TestResolve(t *testing.T) {
	for _, c := range resolveCases() {
		t.Run(c.name, func(t *testing.T) {
			f, gs, err := Resolve("model.w", c.O, c.I, c.w, c.s, c.stamp)
			if c.err == nil {
				if err != nil || f != c.want || gs != c.gs {
					t.Fatalf("got (%v, %d, %v), want (%v, %d)", f, gs, err, c.want, c.gs)
				}
				// The resolved format's expected bytes equal the observed ones.
				nw, err1 := WeightBytes(f, c.O, c.I, gs)
				ns, err2 := ScaleBytes(f, c.O, c.I, gs)
				var gotS int64
				if c.s != nil {
					gotS = c.s.NBytes
				}
				if err1 != nil || err2 != nil || nw != c.w.NBytes || ns != gotS {
					t.Fatalf("expected bytes (%d, %d) vs observed (%d, %d): %v %v", nw, ns, c.w.NBytes, gotS, err1, err2)
				}
				return
			}
			if err == nil {
				t.Fatalf("got (%v, %d), want an error matching %v", f, gs, c.err)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("error %q does not match %v", err, c.err)
			}
			if c.errType != nil && !errors.As(err, c.errType) {
				t.Fatalf("error %q (%T) is not %T", err, err, c.errType)
			}
			if !strings.Contains(err.Error(), "model.w") && !errors.Is(err, ErrShape) {
				t.Errorf("error %q does not name the tensor", err)
			}
			if c.msgContain != "" && !strings.Contains(err.Error(), c.msgContain) {
				t.Errorf("error %q does not contain %q", err, c.msgContain)
			}
		})
	}
}

func TestResolveErrorFields(t *testing.T) {
	_, _, err := Resolve("t", 4, 64, TensorDesc{"U8", 100}, sd("F32", 16), "")
	var wse *WeightSizeError
	if !errors.As(err, &wse) || wse.Got != 100 || wse.Rows != 4 || wse.Cols != 64 || len(wse.Want) != 4 || wse.Want[0].Bytes != 256 || wse.Want[1].Bytes != 128 {
		t.Fatalf("WeightSizeError fields: %+v", wse)
	}
	_, _, err = Resolve("t", 1, 100, TensorDesc{"U8", 100}, sd("F32", 4), "mxfp4")
	var mis *ErrStampMismatch
	if !errors.As(err, &mis) || mis.Tensor != "t" || mis.Stamped != "mxfp4" || mis.Inferred != "int8-row or fp8-e4m3-b128" {
		t.Fatalf("ErrStampMismatch fields: %+v", mis)
	}
	_, _, err = Resolve("t", 4, 7, TensorDesc{"U8", 16}, sd("F32", 16), "nope")
	var unk *ErrStampUnknown
	if !errors.As(err, &unk) || unk.Stamped != "nope" || unk.Inferred != "int4-row" {
		t.Fatalf("ErrStampUnknown fields: %+v", unk)
	}
	_, _, err = Resolve("t", 2, 100, TensorDesc{"U8", 100}, sd("F32", 12), "")
	var sse *ScaleSizeError
	if !errors.As(err, &sse) || sse.Got != 12 || len(sse.Want) != 1+len(groupSizes) || sse.Want[0].Bytes != 8 {
		t.Fatalf("ScaleSizeError fields: %+v", sse)
	}
}

// TestResolveRoundTrip resolves the byte counts of every implemented format
// over many shapes and checks it returns the format (or, at a collision, the
// documented default), and that a stamp naming the format selects it.
func TestResolveRoundTrip(t *testing.T) {
	dtypes := map[Format][2]string{F32: {"F32", ""}, BF16: {"BF16", ""}, F16: {"F16", ""}, Int8Row: {"I8", "F32"},
		Int4Row: {"U8", "F32"}, Int4Grouped: {"U8", "F32"}, FP8E4M3B128: {"F8_E4M3", "F32"}, MXFP4: {"U8", "F8_E8M0"}}
	for _, c := range allCases() {
		for _, O := range []int{1, 2, 127, 128, 129, 300} {
			for _, I := range []int{1, 15, 32, 100, 128, 129, 256, 352, 1000} {
				if c.f == MXFP4 && I%32 != 0 {
					continue
				}
				nw, _ := WeightBytes(c.f, O, I, c.gs)
				ns, _ := ScaleBytes(c.f, O, I, c.gs)
				dt := dtypes[c.f]
				var s *TensorDesc
				if dt[1] != "" {
					s = sd(dt[1], ns)
				}
				if I == 1 && (c.f == Int4Row || c.f == Int4Grouped) {
					// O·⌈1/2⌉ == O·1: the byte family has precedence.
					continue
				}
				f, gs, err := Resolve("t", O, I, TensorDesc{dt[0], nw}, s, c.f.String())
				if c.f == Int4Grouped {
					// A coarser gs may share its byte count with a finer one or
					// with int4-row: the finest match wins and the stamp must
					// agree with the inference.
					want, wgs := Int4Grouped, 0
					for _, g := range groupSizes {
						if int64(4*O)*ceilDiv(int64(I), int64(g)) == ns {
							wgs = g
							break
						}
					}
					if ns == int64(4*O) {
						want, wgs = Int4Row, 0
					}
					f2, gs2, err2 := Resolve("t", O, I, TensorDesc{dt[0], nw}, s, "")
					if err2 != nil || f2 != want || gs2 != wgs {
						t.Fatalf("%v [%d,%d]: unstamped (%v, %d, %v), want (%v, %d)", c, O, I, f2, gs2, err2, want, wgs)
					}
					if want == Int4Grouped && (err != nil || f != want || gs != wgs) {
						t.Fatalf("%v [%d,%d]: stamped (%v, %d, %v)", c, O, I, f, gs, err)
					}
					continue
				}
				if err != nil || f != c.f || gs != 0 {
					t.Fatalf("%v [%d,%d]: stamped (%v, %d, %v)", c, O, I, f, gs, err)
				}
			}
		}
	}
}
