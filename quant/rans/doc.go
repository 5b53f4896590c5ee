// Package rans is the entropy-coded expert container (§6.9): 4-bit
// weight tensors (mxfp4, int4-row, int4-grouped) stored as CFS1 records —
// a static order-0 rANS model over the 16 nibble symbols, two interleaved
// 32-bit states, 12-bit frequencies that must sum to exactly 4096, sealed
// by the requirement that decoding consumes the payload exactly and ends
// both states at L — inside ordinary safetensors shards.
//
// The codec: Encode codes weight bytes (falling back to a raw record where
// coding would not shrink them) with a frequency table whose entries are
// pairwise distinct, which closes the one blind spot of the seal (see
// cfs1.Frequencies); its records are cfs1.Encode's. Decoder.DecodeInto decodes a record into caller memory of
// exactly the decoded size, branch-free while four payload bytes remain,
// allocating nothing; it never reads past the record or writes past the
// destination, and refuses every truncation and every corruption the seal
// can see (ErrCorrupt).
//
// Storage: a coded tensor keeps its name, becomes U8 [record bytes], and is
// stamped with its container format in the shard's colibri.fmt metadata
// (§6.8). The stamp is mandatory: nothing is guessed to be coded, and
// Inspect refuses a tensor that looks like a record but is not stamped
// (ErrUnstamped). Scale tensors stay raw.
//
// Tools: Repack writes a complete, deterministic copy of a checkpoint
// directory whose selected tensors are coded, plus a manifest of the
// SHA-256 of every coded tensor's decoded bytes; Verify decodes every record
// and compares. The caller says which tensors to code (a Selector): this
// package knows no model's tensor names.
//
// An engine decodes a coded expert with Inspect (once, at bind time: coded
// or not, decoded size) and Decoder.DecodeInto or Decoder.DecodeTensor (per
// load, into the expert's slot); the decoded bytes are the source tensor's
// bytes, so every kernel result is bit-identical.
//
// Whether the container is faster depends on the disk. With D the disk
// bandwidth, V the decode speed in decoded bytes per second per core (about
// 155 MB/s, BenchmarkDecode), c the cores decoding, and r the stored/raw
// ratio of the packed bytes (0.939 on the released MXFP4 experts, 0.756 on
// int4-row Gaussians; scales are not coded and cost the same either way):
// reading then decoding an expert beats reading it raw exactly when
// D < c·V·(1−r), about 9.5 MB/s per core for MXFP4; with reads and decodes
// overlapped across experts it is D < c·V/p, p the packed share of expert
// bytes (0.94), and the speed-up is at most the inverse of the stored/raw
// ratio of all expert bytes.
package rans
