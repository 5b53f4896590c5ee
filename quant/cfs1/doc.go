// Package cfs1 reads and writes CFS1 records (§6.9.1): a byte string
// stored raw (mode 0) or entropy-coded with a static order-0 model and two
// interleaved 32-bit rANS states over nibbles (mode 1, wire-compatible with
// Colibrì) or bytes (mode 2, this library's extension, used for E8M0 scale
// arrays).
//
// Integer and MXFP4 codes are close to white noise, so an order-0 model per
// tensor is all that pays; measured gains are about 6% on MXFP4 nibbles and
// 90% on E8M0 scale bytes (§6.10).
//
// The decoder is the gate for untrusted bytes: it checks every header field,
// writes exactly the declared number of bytes into caller memory, never
// reads past the record, allocates nothing (DecodeInto; Decode allocates the
// output only up to the caller's limit, since a payload-free record may
// legitimately declare 4 GiB), and accepts a record only if the
// payload is consumed exactly and both final states equal the initial
// encoder state L (the seal that replaces a checksum). Every truncated prefix
// of a valid record is refused.
//
// It is a leaf package: it imports nothing from the rest of the module and
// must never import model packages.
package cfs1
