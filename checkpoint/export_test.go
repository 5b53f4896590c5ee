package checkpoint

// SynthesizeLayout writes the named geometry's config.json, shards and index with every tensor a
// hole: the layout of a geometry too large to generate in a test, for tests of package
// checkpoint_test that bind it.
func SynthesizeLayout(dir, geometry string, seed int64) error {
	g, ok := lookupGeometry(geometry)
	if !ok {
		return ErrUnknownGeometry
	}
	g.Sparse = true
	return writeSynth(dir, g, seed, nil)
}
