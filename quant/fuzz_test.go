package quant

import (
	"encoding/json"
	"errors"
	"testing"
)

func FuzzParseStamp(f *testing.F) {
	for _, s := range []string{`{"a":"mxfp4"}`, `{}`, `{"a":"mxfp4","a":"f32"}`, `{"a":1}`, `[]`, `{"a":"x"}{}`,
		`{"a\u0000":"int8-row","b":"fp8-e4m3-b128"}`, `{"a":"mxfp4",}`, ``, `{"a":{"b":"c"}}`, "{\"\xff\":\"f32\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseStamp("shard", text)
		if err != nil {
			if !errors.Is(err, ErrStamp) {
				t.Fatalf("error %v does not match ErrStamp", err)
			}
			return
		}
		if len(m) > MaxStampEntries {
			t.Fatalf("%d entries accepted", len(m))
		}
		// An accepted stamp is a flat string object: it survives a round
		// trip through encoding/json unchanged.
		var back map[string]string
		if err := json.Unmarshal([]byte(text), &back); err != nil || len(back) != len(m) {
			t.Fatalf("accepted %q but encoding/json says %v (%d vs %d entries)", text, err, len(back), len(m))
		}
		for k, v := range m {
			if back[k] != v {
				t.Fatalf("entry %q: %q vs %q", k, v, back[k])
			}
		}
	})
}

var fuzzDTypes = []string{"F32", "BF16", "F16", "U8", "I8", "F8_E4M3", "F8_E8M0", "F64", "I32", ""}

func FuzzResolve(f *testing.F) {
	f.Add(int64(4), int64(256), uint8(3), int64(512), true, uint8(3), int64(32), "")
	f.Add(int64(1), int64(100), uint8(3), int64(100), true, uint8(0), int64(4), "fp8-e4m3-b128")
	f.Add(int64(1), int64(512), uint8(3), int64(512), true, uint8(3), int64(4), "int8-row")
	f.Add(int64(2), int64(100), uint8(3), int64(100), true, uint8(0), int64(56), "int4-grouped")
	f.Add(int64(3), int64(5), uint8(1), int64(30), false, uint8(0), int64(0), "bf16")
	f.Add(int64(256), int64(256), uint8(5), int64(65536), true, uint8(6), int64(4), "mxfp4-cfs1")
	f.Add(int64(-1), int64(1<<62), uint8(3), int64(-5), true, uint8(9), int64(1<<62), "nope")
	f.Fuzz(func(t *testing.T, O, I int64, wdt uint8, nb int64, hasScale bool, sdt uint8, ns int64, stamp string) {
		w := TensorDesc{DType: fuzzDTypes[int(wdt)%len(fuzzDTypes)], NBytes: nb}
		var s *TensorDesc
		if hasScale {
			s = &TensorDesc{DType: fuzzDTypes[int(sdt)%len(fuzzDTypes)], NBytes: ns}
		}
		if O != int64(int(O)) || I != int64(int(I)) {
			return
		}
		fm, gs, err := Resolve("t", int(O), int(I), w, s, stamp)
		if err != nil {
			for _, e := range []error{ErrShape, ErrWeightSize, ErrScaleSize, ErrDType, ErrNotImplemented, ErrStamp, ErrCoded} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("error %v matches no sentinel", err)
		}
		// Success means exact byte counts for an implemented, uncoded format.
		if !fm.Implemented() || fm.Coded() {
			t.Fatalf("resolved to %v (%v)", fm, fm.Status())
		}
		if stamp != "" && stamp != fm.String() {
			t.Fatalf("stamp %q but resolved %v", stamp, fm)
		}
		wb, err1 := WeightBytes(fm, int(O), int(I), gs)
		sb, err2 := ScaleBytes(fm, int(O), int(I), gs)
		var gotS int64
		if s != nil {
			gotS = s.NBytes
		}
		if err1 != nil || err2 != nil || wb != nb || sb != gotS {
			t.Fatalf("%v [%d,%d] gs=%d: expected (%d, %d) observed (%d, %d) %v %v", fm, O, I, gs, wb, sb, nb, gotS, err1, err2)
		}
		// Small results must construct a matrix (lossless12 bytes are
		// checked block by block when built, so zeros are refused).
		if nb+gotS < 1<<16 && fm != Lossless12 {
			if _, err := New(fm, int(O), int(I), gs, make([]byte, nb), make([]byte, gotS)); err != nil {
				t.Fatalf("New(%v, %d, %d, %d): %v", fm, O, I, gs, err)
			}
		}
	})
}

func FuzzResolveCoded(f *testing.F) {
	w := make([]byte, 4*128)
	for i := range w {
		w[i] = byte(i*37) & 0x77
	}
	_, rec, _ := EncodeCoded(MXFP4, w)
	f.Add(int64(4), int64(256), rec, uint8(1), int64(32), "mxfp4-cfs1")
	f.Add(int64(4), int64(256), rec, uint8(0), int64(16), "int4-row-cfs1")
	f.Add(int64(1), int64(3), []byte("CFS1\x00\x02\x00\x00\x00\x01\x02"), uint8(0), int64(4), "int4-row-cfs1")
	f.Fuzz(func(t *testing.T, O, I int64, record []byte, sdt uint8, ns int64, stamp string) {
		if O != int64(int(O)) || I != int64(int(I)) || O*I > 1<<20 || O*I < 0 {
			return
		}
		s := &TensorDesc{DType: []string{"F32", "F8_E8M0", "U8", "BF16"}[int(sdt)%4], NBytes: ns}
		fm, gs, dec, err := ResolveCoded("t", int(O), int(I), "U8", record, s, stamp)
		if err != nil {
			return
		}
		wb, _ := WeightBytes(fm, int(O), int(I), gs)
		if int64(len(dec)) != wb {
			t.Fatalf("%v: decoded %d bytes, want %d", fm, len(dec), wb)
		}
		if _, err := New(fm, int(O), int(I), gs, dec, make([]byte, ns)); err != nil {
			t.Fatalf("New: %v", err)
		}
	})
}
