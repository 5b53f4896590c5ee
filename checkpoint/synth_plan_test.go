package checkpoint

import (
	"fmt"
	"slices"
	"testing"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
)

func mustLookup(t *testing.T, name string) geometry {
	t.Helper()
	g, ok := lookupGeometry(name)
	if !ok {
		t.Fatalf("geometry %q missing", name)
	}
	return g
}

// TestSynthK3PlanSizes checks the k3 geometry's layout against the byte counts of
// §3.3 and §3.5, which were measured on the released checkpoint.
func TestSynthK3PlanSizes(t *testing.T) {
	g := mustLookup(t, "k3")
	c := &g.Config
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	units, err := synthPlan(c, g.Released)
	if err != nil {
		t.Fatal(err)
	}
	layer := make([]int64, c.NumLayers)
	var embedHead, experts, nTensors int64
	perExpert := map[int64]int{}
	for _, u := range units {
		var b int64
		for i := range u {
			b += u[i].bytes()
			nTensors++
		}
		name := u[0].name
		l, inLayer := layout.LayerOf(name)
		switch {
		case layout.IsExpert(name):
			experts += b
			perExpert[b]++
		case inLayer:
			layer[l] += b
		default:
			embedHead += b
		}
	}
	if len(perExpert) != 1 || perExpert[17_547_264] != 92*896 {
		t.Errorf("expert sizes %v, want 82432 experts of 17,547,264 bytes", perExpert)
	}
	if experts != 1_446_456_066_048 {
		t.Errorf("all experts %d bytes, want 1,446,456,066,048", experts)
	}
	// embed + lm_head = 4,697,620,480; plus the final norm and the output AttnRes pair in BF16.
	if want := int64(4_697_620_480 + 3*7168*2); embedHead != want {
		t.Errorf("embed+head %d bytes, want %d", embedHead, want)
	}
	var trunk int64
	for l, b := range layer {
		trunk += b
		want := int64(1_267_744_256)
		switch {
		case l == 0:
			want = 2_341_213_184
		case c.IsMLA(l):
			want = 844_335_616
		}
		if b != want {
			t.Errorf("layer %d trunk %d bytes, want %d", l, b, want)
		}
	}
	if trunk != 108_811_877_376 {
		t.Errorf("trunk %d bytes, want 108,811,877,376", trunk)
	}
	// 497,220 tensors in the released checkpoint, of which the vision tower's are not written.
	t.Logf("k3 plan: %d text tensors, trunk %d B, experts %d B, embed+head %d B", nTensors, trunk, experts, embedHead)
}

func TestSynthGeometries(t *testing.T) {
	var names []string
	for _, g := range knownGeometries() {
		names = append(names, g.Name)
		if err := g.Config.Validate(); err != nil {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
	if !slices.Equal(names, []string{"tiny", "perf", "k3", "k3-routed"}) {
		t.Errorf("geometries %v", names)
	}
	if _, ok := lookupGeometry("huge"); ok {
		t.Error("unknown geometry found")
	}
	if err := writeSynth(t.TempDir(), geometry{Name: "bad", Config: config.Config{}, Shards: 1}, 1, nil); err == nil {
		t.Error("an invalid config was written")
	}
	dir := writeGeometry(t, "tiny", 1)
	if err := writeSynth(dir, mustLookup(t, "tiny"), 1, nil); err == nil {
		t.Error("wrote into a non-empty directory")
	}
}

// TestSynthTinyMatchesFixture: the tiny geometry has exactly the configuration of models/tiny.
func TestSynthTinyMatchesFixture(t *testing.T) {
	want, err := config.Load(testkit.Path(t, "models/tiny/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := mustLookup(t, "tiny")
	if got, w := fmt.Sprintf("%+v", g.Config), fmt.Sprintf("%+v", *want); got != w {
		t.Errorf("tiny geometry:\n%s\nmodels/tiny:\n%s", got, w)
	}
}
