// Package trace writes and reads the routed-expert trace files of §9.7.
//
// expert_trace.bin is a flat sequence of little-endian int32 pairs (layer,
// expert), one per demand request in request order, with no header: its
// size is 8·requests. expert_hist.json is one line
// {"n_layers":N,"n_experts":M,"counts":{"L,e":count,…}} holding the non-zero
// counts. A FileWriter records both; Open maps a trace read-only
// (golang.org/x/exp/mmap) and Decode parses one held in memory.
package trace
