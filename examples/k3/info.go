package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/k3-project/k3"
)

// cmdInfo prints a model's parameter and byte counts and per-session state sizes as JSON.
func cmdInfo(args []string, stdout, stderr io.Writer) int {
	pos, _, err := parseArgs(args, flagSpec{})
	if err == nil && len(pos) != 1 {
		err = usagef("", "usage: k3 info <model_dir>")
	}
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
	}
	m, err := k3.Open(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitRuntime
	}
	defer m.Close()
	c := m.Config()
	out := struct {
		Layers, Vocab, Hidden int
		k3.Info
	}{c.NumLayers, c.Vocab, c.Hidden, m.Info()}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return exitOK
}

// printPlan writes the memory figures a run depends on, before decoding starts.
func printPlan(w io.Writer, m *k3.Model, positions int) {
	in := m.Info()
	gb := func(b int64) float64 { return float64(b) / 1e9 }
	fmt.Fprintf(w, "k3: weights %.3f GB mapped (trunk %.3f, experts %.3f, embed+head %.3f); %d parameters\n",
		gb(in.Bytes), gb(in.Trunk.Bytes), gb(in.Experts.Bytes), gb(in.EmbedHead.Bytes), in.Params)
	fmt.Fprintf(w, "k3: session state: KDA %.3f MB, MLA latent cache %d B/position (%.3f MB for %d positions)\n",
		float64(in.KDAStateBytes)/1e6, in.MLACacheBytesPerPosition,
		float64(in.MLACacheBytesPerPosition*int64(positions))/1e6, positions)
}
