package checkpoint_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
)

// identify opens dir and computes its identity.
func identify(t testing.TB, dir string) (checkpoint.Identity, checkpoint.IdentityStats) {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	id, st, err := checkpoint.Identify(ck, cfg)
	require.NoError(t, err)
	return id, st
}

// Two checkpoints of one geometry drawn from different seeds — same config, same tensor set —
// are different models; the same seed twice is the same model.
func TestIdentityTellsSameGeometrySiblingsApart(t *testing.T) {
	a, _ := identify(t, testkit.Synth(t, checkpoint.Synthesize, "tiny", 1))
	a2, _ := identify(t, testkit.Synth(t, checkpoint.Synthesize, "tiny", 1))
	b, _ := identify(t, testkit.Synth(t, checkpoint.Synthesize, "tiny", 2))
	require.Equal(t, a, a2, "the same seed twice")
	require.NotEqual(t, a, b, "two seeds of one geometry")
	require.False(t, a.IsZero())
}

// A byte changed in a sampled page of any dense tensor changes the identity; a byte changed in
// a routed expert does not (a coded copy re-encodes the experts and must keep the identity).
func TestIdentityCoversDenseTensorsNotExperts(t *testing.T) {
	dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 3)
	base, st := identify(t, dir)
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	var dense, big, expert *safetensors.Tensor
	for _, tn := range ck.Tensors() {
		c, ok := layout.Classify(tn.Name)
		switch {
		case !ok:
		case c == layout.Experts && expert == nil:
			expert = tn
		case c != layout.Experts && tn.Size > 4*4096 && big == nil:
			big = tn
		case c != layout.Experts && dense == nil:
			dense = tn
		}
	}
	require.NoError(t, ck.Close())
	require.NotNil(t, dense)
	require.NotNil(t, big, "a dense tensor larger than the hashed-whole bound")
	require.NotNil(t, expert)
	require.Positive(t, st.Tensors)
	for _, c := range []struct {
		what    string
		t       *safetensors.Tensor
		off     int64
		changes bool
	}{
		{"a small dense tensor's last byte", dense, dense.Size - 1, true},
		{"a large dense tensor's first byte", big, 0, true},
		{"a large dense tensor's middle page", big, (big.Size / 2) &^ 4095, true},
		{"a large dense tensor's last byte", big, big.Size - 1, true},
		{"a routed expert's first byte", expert, 0, false},
	} {
		testkit.FlipBits(t, c.t.File, c.t.Offset+c.off, 0x10)
		got, _ := identify(t, dir)
		testkit.FlipBits(t, c.t.File, c.t.Offset+c.off, 0x10)
		if c.changes {
			require.NotEqual(t, base, got, c.what)
		} else {
			require.Equal(t, base, got, c.what)
		}
	}
}

func TestParseIdentity(t *testing.T) {
	id, _ := identify(t, testkit.Synth(t, checkpoint.Synthesize, "tiny", 4))
	back, err := checkpoint.ParseIdentity(id.String())
	require.NoError(t, err)
	require.Equal(t, id, back)
	for _, bad := range []string{"", id.String()[:62], id.String() + "00", "X" + id.String()[1:],
		"A" + id.String()[1:]} {
		_, err := checkpoint.ParseIdentity(bad)
		require.ErrorIs(t, err, checkpoint.ErrIdentity, "%q", bad)
	}
}

// TestIdentityCost logs what Identify reads and how long it takes on each fixture model and, when
// K3_PERF_DIR names one, on that checkpoint (the figure docs/checkpoint.md §3.6 quotes).
func TestIdentityCost(t *testing.T) {
	dirs := testkit.Models(t)
	if p := os.Getenv("K3_PERF_DIR"); p != "" {
		dirs = append(dirs, p)
	}
	for _, dir := range dirs {
		t0 := time.Now()
		_, st := identify(t, dir)
		t.Logf("%s: %d tensors, %d reads, %d bytes, %v", filepath.Base(dir), st.Tensors, st.Reads, st.Bytes, time.Since(t0))
		require.Positive(t, st.Tensors)
	}
}
