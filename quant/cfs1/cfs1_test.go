package cfs1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// skewed returns n bytes whose nibbles (or bytes) follow a peaked
// distribution, like quantized weights.
func skewed(rng *rand.Rand, n int, mode byte) []byte {
	b := make([]byte, n)
	for i := range b {
		if mode == ModeNibble {
			lo := byte(8 + int(math.Round(rng.NormFloat64()*1.5)))
			hi := byte(8 + int(math.Round(rng.NormFloat64()*1.5)))
			b[i] = lo&15 | hi<<4
		} else {
			b[i] = byte(120 + rng.IntN(3))
		}
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []byte{ModeNibble, ModeByte} {
		for _, n := range []int{0, 1, 2, 3, 7, 100, 1000, 65537} {
			for _, kind := range []string{"skewed", "uniform", "constant", "two"} {
				var data []byte
				switch kind {
				case "skewed":
					data = skewed(rng, n, mode)
				case "uniform":
					data = testkit.RandomBytes(rng, n)
				case "constant":
					data = bytes.Repeat([]byte{0x77}, n)
				case "two":
					data = make([]byte, n)
					for i := range data {
						data[i] = 0x11 * byte(rng.IntN(2))
					}
				}
				rec, err := Encode(data, mode)
				if err != nil {
					t.Fatal(err)
				}
				if len(rec) > len(data)+headerLen {
					t.Fatalf("mode %d %s n=%d: record %d bytes > n+9", mode, kind, n, len(rec))
				}
				got, err := Decode(rec, len(data))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("mode %d %s n=%d: decode %v", mode, kind, n, err)
				}
				if kind == "skewed" && n >= 1000 && rec[4] != mode {
					t.Fatalf("mode %d skewed n=%d fell back to raw", mode, n)
				}
				if kind == "uniform" && n >= 1000 && rec[4] != ModeRaw {
					t.Fatalf("mode %d uniform n=%d not raw (%d bytes)", mode, n, len(rec))
				}
				// Deterministic.
				again, _ := Encode(data, mode)
				if !bytes.Equal(again, rec) {
					t.Fatal("Encode is not deterministic")
				}
			}
		}
	}
	// 1 MB of uniform bytes comes out raw (§6.9.1).
	data := testkit.RandomBytes(rng, 1<<20)
	for _, mode := range []byte{ModeNibble, ModeByte} {
		rec, err := Encode(data, mode)
		if err != nil || rec[4] != ModeRaw || len(rec) != len(data)+9 {
			t.Fatalf("uniform 1 MB mode %d: mode %d, %d bytes, %v", mode, rec[4], len(rec), err)
		}
	}
	if _, err := Encode([]byte{1}, 3); !errors.Is(err, ErrMode) {
		t.Fatal(err)
	}
}

// TestHandBuiltRecords decodes records written from §6.9.1's byte layout,
// not by Encode.
func TestHandBuiltRecords(t *testing.T) {
	// Mode 0.
	raw := append([]byte("CFS1\x00\x03\x00\x00\x00"), 5, 6, 7)
	if got, err := Decode(raw, 3); err != nil || !bytes.Equal(got, []byte{5, 6, 7}) {
		t.Fatalf("raw: %v %v", got, err)
	}
	// Mode 2 with a single symbol: freq 4096, states L, empty payload.
	rec := append([]byte("CFS1\x02\x04\x00\x00\x00"), make([]byte, 512+8)...)
	binary.LittleEndian.PutUint16(rec[9+2*0x7a:], 4096)
	binary.LittleEndian.PutUint32(rec[9+512:], lowBound)
	binary.LittleEndian.PutUint32(rec[9+516:], lowBound)
	if got, err := Decode(rec, 4); err != nil || !bytes.Equal(got, []byte{0x7a, 0x7a, 0x7a, 0x7a}) {
		t.Fatalf("single symbol: %v %v", got, err)
	}
	// Mode 1, two nibble symbols 3 and 9 with freq 2048 each; each symbol
	// halves nothing and consumes one bit: the state walk is computed here
	// by hand from the decode rule.
	rec1 := append([]byte("CFS1\x01\x01\x00\x00\x00"), make([]byte, 32+8)...)
	binary.LittleEndian.PutUint16(rec1[9+2*3:], 2048)
	binary.LittleEndian.PutUint16(rec1[9+2*9:], 2048)
	// Want nibbles [3, 9] (byte 0x93). Decode of j=0 with state A: slot =
	// xA & 4095 < 2048 → symbol 3, new x = 2048·(xA>>12) + slot, which must
	// equal L = 2^23: xA>>12 = 4096, slot = 0 → xA = 2^24. j=1 with state B:
	// symbol 9 needs slot ∈ [2048, 4096): x = 2048·(xB>>12) + slot − 2048 = L
	// → xB = 2^24 + 2048.
	binary.LittleEndian.PutUint32(rec1[9+32:], 1<<24)
	binary.LittleEndian.PutUint32(rec1[9+36:], 1<<24+2048)
	if got, err := Decode(rec1, 1); err != nil || !bytes.Equal(got, []byte{0x93}) {
		t.Fatalf("hand-built mode 1: %x %v", got, err)
	}
	if enc, _ := Encode([]byte{0x93}, ModeNibble); enc[4] != ModeRaw {
		t.Log("one byte codes raw (a coded record is longer), as it must")
	}
}

func TestRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := skewed(rng, 3000, ModeNibble)
	good, _ := Encode(data, ModeNibble)
	if good[4] != ModeNibble {
		t.Fatal("test data did not code")
	}
	dst := make([]byte, len(data))
	mut := func(f func(r []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"short header":  good[:8],
		"bad magic":     mut(func(r []byte) []byte { r[0] = 'X'; return r }),
		"unknown mode":  mut(func(r []byte) []byte { r[4] = 3; return r }),
		"zero length":   mut(func(r []byte) []byte { binary.LittleEndian.PutUint32(r[5:], 0); return r }),
		"freq sum":      mut(func(r []byte) []byte { r[9]++; return r }),
		"state low":     mut(func(r []byte) []byte { binary.LittleEndian.PutUint32(r[9+32:], lowBound-1); return r }),
		"state high":    mut(func(r []byte) []byte { binary.LittleEndian.PutUint32(r[9+36:], stateMax); return r }),
		"trailing byte": append(append([]byte(nil), good...), 0),
		"raw too long":  append([]byte("CFS1\x00\x01\x00\x00\x00"), 1, 2),
		"raw too short": []byte("CFS1\x00\x02\x00\x00\x00\x01"),
		"short coded":   good[:9+32+7],
	}
	for name, rec := range cases {
		if _, err := DecodeInto(dst, rec); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := DecodeInto(dst[:len(dst)-1], good); !errors.Is(err, ErrTooLarge) {
		t.Errorf("small dst: %v", err)
	}
	// Every strict prefix of a valid record is refused.
	for k := range len(good) {
		if _, err := DecodeInto(dst, good[:k]); err == nil {
			t.Fatalf("prefix of %d/%d bytes accepted", k, len(good))
		}
	}
	// Single bit flips in the payload: refused or (rarely) decoded to
	// something else, never a panic; count the escapes.
	escaped := 0
	for i := 9 + 32 + 8; i < len(good); i++ {
		r := append([]byte(nil), good...)
		r[i] ^= 1 << (i % 8)
		if _, err := DecodeInto(dst, r); err == nil {
			escaped++
		}
	}
	if escaped > 0 {
		t.Logf("%d of %d payload bit flips passed the seal", escaped, len(good)-49)
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := skewed(rng, 4096, ModeByte)
	rec, _ := Encode(data, ModeByte)
	dst := make([]byte, len(data))
	if a := testing.AllocsPerRun(20, func() {
		if _, err := DecodeInto(dst, rec); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("DecodeInto allocates %v times per run", a)
	}
}

func TestSpecFrequencies(t *testing.T) {
	// 3 symbols with counts 1, 1, 4094·k: the rare ones are raised to 1 and
	// the difference goes to the most frequent.
	data := append(bytes.Repeat([]byte{9}, 10000), 1, 2)
	f, ok := SpecFrequencies(data, ModeByte)
	if !ok || f[1] != 1 || f[2] != 1 || f[9] != 4094 {
		t.Fatalf("SpecFrequencies: %v %v %v %v", ok, f[1], f[2], f[9])
	}
	// Ties for the top go to the lowest symbol.
	f, _ = SpecFrequencies([]byte{5, 3, 5, 3, 4}, ModeByte)
	// ⌊2·4096/5⌋ = 1638, ⌊4096/5⌋ = 819; the missing 1 goes to symbol 3.
	if f[3] != 1639 || f[4] != 819 || f[5] != 1638 {
		t.Fatalf("tie: %d %d %d", f[3], f[4], f[5])
	}
}

func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, mode := range []byte{ModeNibble, ModeByte} {
		rec, _ := Encode(skewed(rng, 200, mode), mode)
		f.Add(rec)
	}
	f.Add([]byte("CFS1\x00\x01\x00\x00\x00\x05"))
	f.Add([]byte("CFS1"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		dst := make([]byte, 1<<16)
		n, err := DecodeInto(dst, rec)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		_, want, _ := Header(rec)
		if n != want {
			t.Fatalf("decoded %d bytes, header says %d", n, want)
		}
		// Decode with a limit agrees with DecodeInto.
		got, err := Decode(rec, 1<<16)
		if err != nil || !bytes.Equal(got, dst[:n]) {
			t.Fatalf("Decode disagrees with DecodeInto: %v", err)
		}
	})
}

// A valid 529-byte record (one byte symbol of frequency 4096, sealed states,
// no payload) declares 2^32−1 bytes. Decode must refuse it against the
// caller's limit without allocating, while DecodeInto on a buffer of the
// declared size would decode it exactly.
func TestDecodeBoundedByLimit(t *testing.T) {
	rec := append([]byte("CFS1\x02\xff\xff\xff\xff"), make([]byte, 512+8)...)
	binary.LittleEndian.PutUint16(rec[9+2*0x42:], 4096)
	binary.LittleEndian.PutUint32(rec[9+512:], lowBound)
	binary.LittleEndian.PutUint32(rec[9+516:], lowBound)
	if len(rec) != 529 {
		t.Fatalf("record of %d bytes, want 529", len(rec))
	}
	_, n, err := Header(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1<<32-1 {
		t.Fatalf("Header declares %d bytes, want 2^32-1", n)
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = Decode(rec, 1<<20)
	runtime.ReadMemStats(&ms)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode over the limit: %v, want ErrTooLarge", err)
	}
	if a := ms.TotalAlloc - before; a >= 1<<16 {
		t.Errorf("%d bytes allocated refusing the record", a)
	}

	// The same record shrunk to a 4-byte declaration is valid and decodes.
	binary.LittleEndian.PutUint32(rec[5:], 4)
	got, err := Decode(rec, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte{0x42, 0x42, 0x42, 0x42}) {
		t.Errorf("decoded %x, want 42424242", got)
	}
}

func TestDistinct(t *testing.T) {
	var f [256]uint32
	f[0], f[1], f[2], f[3], f[4] = 1, 1, 1, 7, 4086
	for _, c := range []struct {
		in   []uint32
		want []uint32
	}{
		{[]uint32{1, 1, 1, 7, 4086}, []uint32{1, 2, 3, 7, 4083}},
		{[]uint32{2048, 1024, 1024}, []uint32{2047, 1024, 1025}},
	} {
		var f [256]uint32
		copy(f[:], c.in)
		d, ok := Distinct(f)
		if !ok || !slices.Equal(d[:len(c.want)], c.want) {
			t.Fatalf("Distinct(%v) = %v, %v; want %v, true", c.in, d[:len(c.want)], ok, c.want)
		}
	}
	var h [256]uint32
	h[0], h[1] = 2048, 2048
	if _, ok := Distinct(h); ok {
		t.Fatal("two symbols of 2048 cannot be untied")
	}
}

// TestEncodeUntiesNibbleTables: Encode codes nibble records with pairwise distinct frequencies
// whenever Distinct can make them so, and byte records with the §6.9.1 table.
func TestEncodeUntiesNibbleTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tied := 0
	for n := 1; n < 400; n++ {
		data := skewed(rng, n, ModeNibble)
		spec, ok := SpecFrequencies(data, ModeNibble)
		if !ok {
			continue
		}
		want, untied := Distinct(spec)
		if want != spec {
			tied++
		}
		got, _ := Frequencies(data, ModeNibble)
		if got != want {
			t.Fatalf("n=%d: Frequencies %v, want %v", n, got, want)
		}
		if untied {
			seen := map[uint32]bool{}
			for _, f := range got[:16] {
				if f > 0 {
					if seen[f] {
						t.Fatalf("n=%d: frequency %d repeats", n, f)
					}
					seen[f] = true
				}
			}
		}
		rec, err := Encode(data, ModeNibble)
		if err != nil {
			t.Fatal(err)
		}
		if rec[4] == ModeNibble {
			for s := range 16 {
				if stored := binary.LittleEndian.Uint16(rec[headerLen+2*s:]); uint32(stored) != got[s] {
					t.Fatalf("n=%d: symbol %d stored with frequency %d, want %d", n, s, stored, got[s])
				}
			}
		}
		bdata := skewed(rng, n, ModeByte)
		bs, _ := SpecFrequencies(bdata, ModeByte)
		bf, _ := Frequencies(bdata, ModeByte)
		if bs != bf {
			t.Fatalf("n=%d: byte record frequencies %v, want the §6.9.1 table %v", n, bf, bs)
		}
	}
	if tied == 0 {
		t.Fatal("no input had a tied table")
	}
}
