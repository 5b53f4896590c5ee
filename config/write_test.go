package config

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/fileio/strictjson"
	"github.com/k3-project/k3/internal/testkit"
)

func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	data, err := MarshalNested(c)
	if err != nil {
		t.Fatalf("MarshalNested: %v", err)
	}
	again, err := MarshalNested(c)
	if err != nil || !bytes.Equal(data, again) {
		t.Fatal("MarshalNested is not deterministic")
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(MarshalNested): %v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v\n%s", got, c, data)
	}
	// The output is the released nested shape: the layer map lives in
	// text_config.linear_attn_config with the bare KDA spellings.
	v, err := strictjson.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	a := v.Get("text_config").Get("linear_attn_config")
	if a.Get("full_attn_layers") == nil || a.Get("num_heads") == nil || a.Get("head_dim") == nil ||
		(c.KDALayers != nil) != (a.Get("kda_layers") != nil) || v.Get("hidden_size") != nil {
		t.Fatalf("not the nested shape:\n%s", data)
	}
}

func TestMarshalNestedRoundTrip(t *testing.T) {
	roundTrip(t, K3())
	roundTrip(t, tinyWant())
	c := tinyWant()
	c.KDALayers, c.EOSTokenIDs = nil, []int{}
	roundTrip(t, c)
	c.EOSTokenIDs = []int{3, 1, 2}
	c.MLAOutGate, c.MoERenorm, c.LatentNorm = false, false, false
	c.RMSEps, c.GateLB, c.RoutedScale = 1e-300, -math.MaxFloat64, 2.5
	c.SiTUBeta, c.SiTULinearBeta = math.SmallestNonzeroFloat64, 0.1
	roundTrip(t, c)
}

func TestMarshalNestedFixtures(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		c, err := Load(dir + "/config.json")
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
	}
}

// Random valid configs survive the round trip exactly.
func TestMarshalNestedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		c := randomConfig(r)
		if err := c.Validate(); err != nil {
			t.Fatalf("generator made an invalid config: %v", err)
		}
		roundTrip(t, c)
	}
}

func randomConfig(r *rand.Rand) *Config {
	n := 2 + r.IntN(120)
	size := func() int { return 1 + r.IntN(100000) }
	f := func() float64 { return r.ExpFloat64()*math.Pow(10, float64(r.IntN(40)-20)) + 1e-300 }
	c := &Config{
		Hidden: size(), NumLayers: n, Vocab: size(), RMSEps: f(),
		KDAHeads: size(), KDAHeadDim: size(), ConvK: size(), GateLB: -f(),
		MLAHeads: size(), QLoRA: size(), KVLoRA: size(), QKNope: size(), QKRope: r.IntN(200), VHead: size(),
		MLAOutGate: r.IntN(2) == 0, NumExperts: 1 + r.IntN(MaxExperts), NumShared: r.IntN(4), Latent: size(), MoEInter: size(),
		RoutedScale: f(), MoERenorm: r.IntN(2) == 0, LatentNorm: r.IntN(2) == 0,
		FirstDense: r.IntN(n + 1), DenseInter: size(), AttnResBlock: 1 + r.IntN(n+3),
		SiTUBeta: f(), SiTULinearBeta: f(),
	}
	c.TopK = 1 + r.IntN(min(c.NumExperts, MaxTopK))
	for _, l := range r.Perm(n)[:1+r.IntN(n-1)] {
		c.FullAttn = append(c.FullAttn, l+1)
	}
	if r.IntN(2) == 0 {
		c.KDALayers = []int{}
		for _, l := range c.KDALayerIndices() {
			c.KDALayers = append(c.KDALayers, l+1)
		}
		r.Shuffle(len(c.KDALayers), func(i, j int) { c.KDALayers[i], c.KDALayers[j] = c.KDALayers[j], c.KDALayers[i] })
	}
	if r.IntN(2) == 0 {
		c.EOSTokenIDs = []int{r.IntN(1 << 20)}
	}
	return c
}

func TestMarshalNestedRefusesInvalid(t *testing.T) {
	c := K3()
	c.TopK = 0
	c.RMSEps = math.NaN()
	_, err := MarshalNested(c)
	ce := configError(t, err)
	if len(ce.Violations) != 2 {
		t.Fatalf("violations %q", ce.Violations)
	}
	var b bytes.Buffer
	if err := WriteNested(&b, c); err == nil || b.Len() != 0 {
		t.Fatal("WriteNested wrote an invalid config")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteNested(t *testing.T) {
	var b bytes.Buffer
	if err := WriteNested(&b, K3()); err != nil {
		t.Fatal(err)
	}
	want, _ := MarshalNested(K3())
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("WriteNested differs from MarshalNested")
	}
	if err := WriteNested(failWriter{}, K3()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("write error: %v", err)
	}
}

func TestFormatFloat(t *testing.T) {
	for f, want := range map[float64]string{4: "4.0", -5: "-5.0", 1e-5: "1e-05", 25: "25.0", 0.5: "0.5", 1e21: "1e+21", 123456789: "1.23456789e+08", 1e20: "1e+20"} {
		if got := formatFloat(f); got != want {
			t.Errorf("formatFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestClone(t *testing.T) {
	a := K3()
	b := a.Clone()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Clone differs")
	}
	b.FullAttn[0], b.KDALayers[0], b.EOSTokenIDs[0] = 99, 99, 99
	if a.FullAttn[0] != 4 || a.KDALayers[0] != 1 || a.EOSTokenIDs[0] != 163586 {
		t.Fatal("Clone shares slices")
	}
	c := tinyWant()
	if d := c.Clone(); d.EOSTokenIDs != nil || !reflect.DeepEqual(c, d) {
		t.Fatal("Clone turned nil into empty")
	}
}
