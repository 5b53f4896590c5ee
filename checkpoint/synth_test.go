package checkpoint_test

import (
	"path/filepath"
	"testing"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
)

// TestPerfGeometryBinds writes the perf geometry's layout with sparse data and binds it, so the
// benchmark geometry is checked without generating its 1.6 GB.
func TestPerfGeometryBinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "perf")
	if err := checkpoint.SynthesizeLayout(dir, "perf", 1); err != nil {
		t.Fatal(err)
	}
	m, err := k3.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := m.Info()
	c := m.Config()
	if want := int64((c.NumLayers - c.FirstDense) * c.NumExperts * 3 * c.MoEInter * c.Latent); in.Experts.Params != want {
		t.Errorf("expert parameters %d, want %d", in.Experts.Params, want)
	}
	if want := int64(len(c.FullAttn) * (c.KVLoRA + c.QKRope) * 4); m.Plan().MLABytesPerPosition != want {
		t.Errorf("MLA bytes per position %d, want %d", m.Plan().MLABytesPerPosition, want)
	}
	t.Logf("perf: %d parameters, %d bytes (%d trunk, %d experts)", in.Params, in.Bytes, in.Trunk.Bytes, in.Experts.Bytes)
}
