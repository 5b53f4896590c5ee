package mxfp4

import "bytes"

// Stats counts what an operation saw in the scale bytes it processed. Each
// weight group is counted once per call, also by MatMul (not once per
// activation row).
type Stats struct {
	// Groups is the number of 32-element weight groups processed.
	Groups int
	// NaNScaleGroups is the number of those groups whose scale byte was 255
	// (OCP NaN): they contributed exactly nothing.
	NaNScaleGroups int
}

// Add accumulates o into s, so a caller can keep running totals over many
// calls (for example across goroutines, after they finish).
func (s *Stats) Add(o Stats) {
	s.Groups += o.Groups
	s.NaNScaleGroups += o.NaNScaleGroups
}

// ScanScales returns the statistics of a scale array without touching any
// weights, for a check at bind time.
func ScanScales(scales []byte) Stats {
	// bytes.Count of one byte is the runtime's vector count: the packed
	// mat-mul scans every call's scales, and a byte loop showed in prefill
	// profiles.
	return Stats{Groups: len(scales), NaNScaleGroups: bytes.Count(scales, []byte{NaNScale})}
}
