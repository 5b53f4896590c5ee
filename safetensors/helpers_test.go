package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"math"
	"os"
	"testing"
)

// indepEntry is a header entry decoded by encoding/json, independently of
// the package's scanner.
type indepEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

type indepFile struct {
	raw     []byte
	n       int64
	entries map[string]indepEntry
	meta    map[string]string
}

// readIndep reads a safetensors file with encoding/json and plain offset
// arithmetic, as an oracle for the package's reader.
func readIndep(t testing.TB, path string) *indepFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(binary.LittleEndian.Uint64(raw))
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &top); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	f := &indepFile{raw: raw, n: n, entries: map[string]indepEntry{}}
	for k, v := range top {
		if k == "__metadata__" {
			if err := json.Unmarshal(v, &f.meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var e indepEntry
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		f.entries[k] = e
	}
	return f
}

func (f *indepFile) data(name string) []byte {
	e := f.entries[name]
	return f.raw[8+f.n+e.Offsets[0] : 8+f.n+e.Offsets[1]]
}

// refDecode widens one element with arithmetic (math.Ldexp) instead of the
// bit manipulation the package uses.
func refDecode(dt DType, b []byte) float64 {
	le := binary.LittleEndian
	switch dt {
	case F32:
		return float64(math.Float32frombits(le.Uint32(b)))
	case F64:
		return float64(float32(math.Float64frombits(le.Uint64(b))))
	case BF16:
		return refMini(uint64(le.Uint16(b)), 8, 7, true)
	case F16:
		return refMini(uint64(le.Uint16(b)), 5, 10, true)
	case F8_E5M2:
		return refMini(uint64(b[0]), 5, 2, true)
	case F8_E4M3:
		if b[0]&0x7f == 0x7f {
			return math.NaN()
		}
		return refMini(uint64(b[0]), 4, 3, false)
	case U8:
		return float64(b[0])
	case I8:
		return float64(int8(b[0]))
	}
	panic("refDecode: " + dt.String())
}

// refMini decodes a sign/exponent/mantissa float with IEEE-style bias;
// ieeeSpecials makes the top exponent Inf/NaN.
func refMini(bits uint64, ebits, mbits int, ieeeSpecials bool) float64 {
	sign := 1.0
	if bits>>(ebits+mbits)&1 == 1 {
		sign = -1
	}
	e := int(bits>>mbits) & (1<<ebits - 1)
	m := float64(bits & (1<<mbits - 1))
	bias := 1<<(ebits-1) - 1
	if ieeeSpecials && e == 1<<ebits-1 {
		if m == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	if e == 0 {
		return sign * math.Ldexp(m, 1-bias-mbits)
	}
	return sign * math.Ldexp(1+m/float64(int(1)<<mbits), e-bias)
}

// sameFloat compares a widened value with a reference: equal, or both NaN;
// the sign of zero must match too.
func sameFloat(got float32, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	return float64(got) == want && math.Signbit(float64(got)) == math.Signbit(want)
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

func mustSeed() maphash.Seed { return maphash.MakeSeed() }

// mustOpen opens path with opts, failing the test on an error; the
// checkpoint is closed when the test ends.
func mustOpen(t testing.TB, path string, opts ...Option) *Checkpoint {
	t.Helper()
	c, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
