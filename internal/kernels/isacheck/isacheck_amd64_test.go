//go:build amd64 && !purego

package isacheck

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/k3-project/k3/internal/testkit"
)

// cases is the random operand sets per instruction; the masks of the first
// two are all ones and zero.
const cases = 300

// probe is one instruction: the features it needs and a check that runs it
// on case i's operands and returns a description of the first difference
// from its reference, or "".
type probe struct {
	name  string
	needs string
	has   bool
	check func(r *rand.Rand, i int) string
}

var (
	hasF  = cpu.X86.HasAVX512F
	hasBW = hasF && cpu.X86.HasAVX512BW
)

var probes = []probe{
	{"VGF2P8AFFINEQB", "AVX-512 GFNI", hasBW && cpu.X86.HasAVX512GFNI, checkAffine},
	{"VPERMI2B", "AVX-512 VBMI", hasBW && cpu.X86.HasAVX512VBMI, checkPermi2b},
	{"VPEXPANDB", "AVX-512 VBMI2", hasBW && cpu.X86.HasAVX512VBMI2, checkExpandb},
	{"VPTERNLOGD", "AVX-512 F", hasF, checkTernlog},
	{"VPERMT2Q", "AVX-512 F", hasF, checkPermt2q},
	{"VCOMPRESSPD", "AVX-512 F", hasF, checkCompress},
	{"VEXPANDPD", "AVX-512 F", hasF, checkExpandpd},
	{"VPGATHERQQ", "AVX-512 F", hasF, checkGather(gatherqq)},
	{"VPGATHERQQ-Z0-Z15", "AVX-512 F", hasF, checkGather(gatherqqLow)},
	{"VCVTTPD2QQ+VCVTQQ2PD", "AVX-512 DQ", hasF && cpu.X86.HasAVX512DQ, checkCvt},
}

// childEnv names the probe a child process runs (see TestInstructions).
const childEnv = "K3_ISACHECK_PROBE"

// TestInstructions runs every probe the CPU can against its reference, each
// in a child process of the test binary (testkit.RunChild): an emulator that
// does not implement a form raises SIGILL, which the Go runtime cannot
// recover from (the child's output then says "SIGILL: illegal instruction"),
// and the other probes must still run. A failure is the subtest of the
// instruction, so that bochs.sh can tell an emulator's fault from a
// kernel's.
func TestInstructions(t *testing.T) {
	if name, ok := testkit.ChildArg(childEnv); ok {
		runChild(t, name)
		return
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			if !p.has {
				t.Skipf("the CPU lacks %s", p.needs)
			}
			testkit.RunChild(t, "TestInstructions", childEnv, p.name)
		})
	}
}

// runChild checks the probe called name.
func runChild(t *testing.T, name string) {
	for _, p := range probes {
		if p.name != name {
			continue
		}
		r := rand.New(rand.NewPCG(7, 8))
		for i := range cases {
			if d := p.check(r, i); d != "" {
				t.Fatalf("%s differs from its SDM definition (case %d): %s", p.name, i, d)
			}
		}
		return
	}
	t.Fatalf("no probe %q", name)
}

func mask64(r *rand.Rand, i int) uint64 {
	switch i {
	case 0:
		return ^uint64(0)
	case 1:
		return 0
	}
	return r.Uint64()
}

func mask8(r *rand.Rand, i int) uint8 { return uint8(mask64(r, i)) }

func randBytes(r *rand.Rand) *[64]byte {
	var b [64]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return &b
}

func randQwords(r *rand.Rand) *[8]uint64 {
	var q [8]uint64
	for i := range q {
		q[i] = r.Uint64()
	}
	return &q
}

func randFloats(r *rand.Rand) *[8]float64 {
	var v [8]float64
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return &v
}

func diffBytes(got, want []byte) string {
	for j := range got {
		if got[j] != want[j] {
			return fmt.Sprintf("byte %d: %#02x, want %#02x", j, got[j], want[j])
		}
	}
	return ""
}

func diffQwords(got, want []uint64) string {
	for j := range got {
		if got[j] != want[j] {
			return fmt.Sprintf("lane %d: %#x, want %#x", j, got[j], want[j])
		}
	}
	return ""
}

func diffFloats(got, want []float64) string {
	for j := range got {
		if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
			return fmt.Sprintf("lane %d: %v, want %v", j, got[j], want[j])
		}
	}
	return ""
}

// checkAffine: bit i of a result byte is the parity of the matrix qword's
// byte 7−i AND the data byte, XOR bit i of imm8 (0 here).
func checkAffine(r *rand.Rand, _ int) string {
	x, a := randBytes(r), randBytes(r)
	var got, want [64]byte
	gf2p8affineqb0(&got, x, a)
	for j := range want {
		q := j / 8 * 8
		for i := range 8 {
			p := bits.OnesCount8(a[q+7-i]&x[j]) & 1
			want[j] |= byte(p) << i
		}
	}
	return diffBytes(got[:], want[:])
}

// checkPermi2b: the index's bits 0–5 pick a byte, bit 6 the table (t1 when
// clear); masked-off bytes are zeroed.
func checkPermi2b(r *rand.Rand, i int) string {
	idx, t1, t2 := randBytes(r), randBytes(r), randBytes(r)
	k := mask64(r, i)
	var got, want [64]byte
	permi2bz(&got, idx, t1, t2, k)
	for j := range want {
		if k>>j&1 == 0 {
			continue
		}
		if idx[j]&64 != 0 {
			want[j] = t2[idx[j]&63]
		} else {
			want[j] = t1[idx[j]&63]
		}
	}
	return diffBytes(got[:], want[:])
}

// expandRef expands src into want under k as the SDM defines it: the
// selected elements take the source's next ones in order, the others keep
// want's.
func expandRef[T any](want, src []T, k uint64) {
	p := 0
	for j := range want {
		if k>>j&1 != 0 {
			want[j] = src[p]
			p++
		}
	}
}

// checkExpandb: the selected bytes take the source's next bytes in order;
// the others keep the destination's.
func checkExpandb(r *rand.Rand, i int) string {
	src, old := randBytes(r), randBytes(r)
	k := mask64(r, i)
	var got [64]byte
	want := *old
	expandb(&got, src, old, k)
	expandRef(want[:], src[:], k)
	if d := diffBytes(got[:], want[:]); d != "" {
		return fmt.Sprintf("mask %#016x: %s", k, d)
	}
	return ""
}

// checkTernlog: each result bit is imm8's bit (a<<2 | b<<1 | c) of the
// destination a and the sources b and c.
func checkTernlog(r *rand.Rand, _ int) string {
	a, b, c := randBytes(r), randBytes(r), randBytes(r)
	var got, want [3][64]byte
	ternlogd(&got, a, b, c)
	for n, imm := range []byte{0xA8, 0xE4, 0xD8} {
		for j := range 64 {
			for i := range 8 {
				sel := (a[j]>>i&1)<<2 | (b[j]>>i&1)<<1 | c[j]>>i&1
				want[n][j] |= (imm >> sel & 1) << i
			}
		}
		if d := diffBytes(got[n][:], want[n][:]); d != "" {
			return fmt.Sprintf("imm8 %#02x: %s", imm, d)
		}
	}
	return ""
}

// checkPermt2q: the index's bits 0–2 pick a qword, bit 3 the table (the
// destination's own when clear).
func checkPermt2q(r *rand.Rand, _ int) string {
	idx, t1, t2 := randQwords(r), randQwords(r), randQwords(r)
	var got [2][8]uint64
	var want [8]uint64
	permt2q(&got, idx, t1, t2)
	for j := range want {
		if idx[j]&8 != 0 {
			want[j] = t2[idx[j]&7]
		} else {
			want[j] = t1[idx[j]&7]
		}
	}
	for n, form := range []string{"register", "memory"} {
		if d := diffQwords(got[n][:], want[:]); d != "" {
			return form + " form: " + d
		}
	}
	return ""
}

// checkCompress: the selected lanes, in order, fill the low lanes; the rest
// keep the destination's.
func checkCompress(r *rand.Rand, i int) string {
	src, old := randFloats(r), randFloats(r)
	k := mask8(r, i)
	var got [8]float64
	want := *old
	compresspd(&got, src, old, k)
	p := 0
	for j := range 8 {
		if k>>j&1 != 0 {
			want[p] = src[j]
			p++
		}
	}
	return diffFloats(got[:], want[:])
}

// checkExpandpd: the selected lanes take the source's next values in order;
// the others keep the destination's.
func checkExpandpd(r *rand.Rand, i int) string {
	src, old := randFloats(r), randFloats(r)
	k := mask8(r, i)
	var got [8]float64
	want := *old
	expandpd(&got, src, old, k)
	expandRef(want[:], src[:], uint64(k))
	return diffFloats(got[:], want[:])
}

// checkGather: the selected lanes load the qword off[j] bytes past base;
// the others keep the destination's.
func checkGather(gather func(dst *[8]uint64, base *uint64, off, old *[8]uint64, k uint8)) func(*rand.Rand, int) string {
	return func(r *rand.Rand, i int) string {
		var table [64]uint64
		for j := range table {
			table[j] = r.Uint64()
		}
		var off [8]uint64
		for j := range off {
			off[j] = 8 * uint64(r.IntN(len(table)))
		}
		old := randQwords(r)
		k := mask8(r, i)
		var got [8]uint64
		want := *old
		gather(&got, &table[0], &off, old, k)
		for j := range 8 {
			if k>>j&1 != 0 {
				want[j] = table[off[j]/8]
			}
		}
		return diffQwords(got[:], want[:])
	}
}

// checkCvt: truncation toward zero, the integer indefinite 1<<63 for NaN and
// for values outside int64; back to float64, rounded to nearest even.
func checkCvt(r *rand.Rand, i int) string {
	var x [8]float64
	if i == 0 {
		x = [8]float64{math.NaN(), math.Inf(1), math.Inf(-1), 0x1p63, -0x1p63, math.Copysign(0, -1), -2.5, 0x1p62 + 0x1p10 + 0.75}
	} else {
		for j := range x {
			// Magnitudes up to 2^64, so some fall outside int64 and many
			// convert back inexactly.
			x[j] = math.Ldexp(r.Float64()+0.5, r.IntN(66)) * float64(1-2*r.IntN(2))
		}
	}
	var got [8]int64
	var back [8]float64
	cvtqq(&got, &back, &x)
	var want [8]int64
	var wantBack [8]float64
	for j, v := range x {
		if math.IsNaN(v) || v >= 0x1p63 || v < -0x1p63 {
			want[j] = math.MinInt64
		} else {
			want[j] = int64(v)
		}
		wantBack[j] = float64(want[j])
	}
	for j := range want {
		if got[j] != want[j] {
			return fmt.Sprintf("VCVTTPD2QQ lane %d of %v: %d, want %d", j, x[j], got[j], want[j])
		}
	}
	if d := diffFloats(back[:], wantBack[:]); d != "" {
		return "VCVTQQ2PD " + d
	}
	return ""
}
