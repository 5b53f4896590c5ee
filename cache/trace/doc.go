// Package trace writes and reads the routed-expert trace files of §9.7.
//
// expert_trace.bin is a 48-byte header (Header: the model's geometry and
// the record count, with a checksum) followed by little-endian int32 pairs
// (layer, expert), one per demand request in request order. The count
// makes a trace cut short detectable (ErrTruncated) and the recorded
// expert size makes a wrong one detectable (Geometry.CheckExpertBytes).
// Traces written before the header existed — the records alone — are
// still read; Trace.Headerless tells the caller to warn that such a trace
// cannot be checked. expert_hist.json is one line
// {"n_layers":N,"n_experts":M,"counts":{"L,e":count,…}} holding the non-zero
// counts.
//
// Start with New for recording (the model's geometry goes into the header;
// Create is for callers that know only its layers and experts) — the
// FileWriter is a cache.Tracer — and Open for reading: a Trace reads its
// records on demand, so a replay's memory does not grow with the trace.
// Both files are written under temporary names and renamed only when
// complete, so a failed or interrupted dump leaves no trace that looks whole.
package trace
