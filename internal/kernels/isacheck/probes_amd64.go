//go:build amd64 && !purego

package isacheck

// Each probe loads its operands from memory, runs one instruction (the
// form and immediate the kernels use) and stores the result; masks are
// passed as integers and moved into a mask register.

// gf2p8affineqb0 is VGF2P8AFFINEQB $0 with the matrices a and the data x
// (GFNI; lossless12's weight builder).
//
//go:noescape
func gf2p8affineqb0(dst, x, a *[64]byte)

// permi2bz is VPERMI2B with zeroing under k: idx selects from t1 (bit 6
// clear) or t2 (set) (VBMI; lossless12).
//
//go:noescape
func permi2bz(dst, idx, t1, t2 *[64]byte, k uint64)

// expandb is VPEXPANDB from memory, merging into old under k (VBMI2;
// lossless12's escapes).
//
//go:noescape
func expandb(dst, src, old *[64]byte, k uint64)

// ternlogd runs VPTERNLOGD with the immediates lossless12 uses, 0xA8,
// 0xE4 and 0xD8, each with a as the destination operand, b the second
// and c the third.
//
//go:noescape
func ternlogd(dst *[3][64]byte, a, b, c *[64]byte)

// permt2q is VPERMT2Q with the second table in a register (dst[0]) and
// from memory (dst[1]) (F; the MXFP4 kernels).
//
//go:noescape
func permt2q(dst *[2][8]uint64, idx, t1, t2 *[8]uint64)

// compresspd is VCOMPRESSPD register to register, merging into old under k
// (F; fmath).
//
//go:noescape
func compresspd(dst, src, old *[8]float64, k uint8)

// expandpd is VEXPANDPD from memory, merging into old under k (F; fmath).
//
//go:noescape
func expandpd(dst, src, old *[8]float64, k uint8)

// gatherqq is VPGATHERQQ of the qwords at base + off[j] (bytes) under k,
// the other lanes keeping old, with the offsets in Z30 (F; the MXFP4
// mat-mul); gatherqqLow has them in Z6, which an EVEX prefix encodes
// without its V' bit.
//
//go:noescape
func gatherqq(dst *[8]uint64, base *uint64, off, old *[8]uint64, k uint8)

//go:noescape
func gatherqqLow(dst *[8]uint64, base *uint64, off, old *[8]uint64, k uint8)

// cvtqq is VCVTTPD2QQ of x into dst, then VCVTQQ2PD of dst into back (DQ;
// fmath's exponentials).
//
//go:noescape
func cvtqq(dst *[8]int64, back, x *[8]float64)
