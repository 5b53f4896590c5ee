package quant

// Stats describes what a matrix's scale bytes hold that a caller may want to
// log or refuse at bind time.
type Stats struct {
	// NaNScaleGroups counts mxfp4 groups whose E8M0 scale byte is 255 (OCP
	// NaN). Such a group contributes exactly nothing to every output
	// (§6.2); it is always 0 for the other formats.
	NaNScaleGroups int
}

// ScanStats scans the scales of m without touching its weights.
func ScanStats(m Matrix) Stats {
	if v, ok := m.(*mx); ok {
		return Stats{NaNScaleGroups: v.NaNScaleGroups()}
	}
	return Stats{}
}
