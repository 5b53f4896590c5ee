package main

import (
	"fmt"
	"io"

	"github.com/k3-project/k3"
)

var infoCmd = command{name: "info", npos: 1, what: "exactly one model directory", main: info, help: `usage: k3 info <model_dir>

Binds the model and prints, as JSON: layers, vocab, hidden; parameter, tensor and byte counts
for the embedding/head, the trunk and the routed experts; the per-session KDA state bytes and
MLA latent-cache bytes per position. Keys are snake_case like the run report's.
`}

// classJSON is k3.ClassInfo with the report's keys.
type classJSON struct {
	Tensors int   `json:"tensors"`
	Params  int64 `json:"params"`
	Bytes   int64 `json:"bytes"`
}

// infoJSON is k3 info's output.
type infoJSON struct {
	Layers                   int       `json:"layers"`
	Vocab                    int       `json:"vocab"`
	Hidden                   int       `json:"hidden"`
	Params                   int64     `json:"params"`
	Bytes                    int64     `json:"bytes"`
	EmbedHead                classJSON `json:"embed_head"`
	Trunk                    classJSON `json:"trunk"`
	Experts                  classJSON `json:"experts"`
	KDAStateBytes            int64     `json:"kda_state_bytes"`
	MLACacheBytesPerPosition int64     `json:"mla_cache_bytes_per_position"`
}

// info prints a model's parameter and byte counts and per-session state sizes as JSON.
func info(a *args, stdout, stderr io.Writer) int {
	m, err := k3.Open(a.pos[0])
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	defer m.Close()
	c, in, p := m.Config(), m.Info(), m.Plan()
	out := infoJSON{Layers: c.NumLayers, Vocab: c.Vocab, Hidden: c.Hidden, Params: in.Params, Bytes: in.Bytes,
		EmbedHead: classJSON(in.EmbedHead), Trunk: classJSON(in.Trunk), Experts: classJSON(in.Experts),
		KDAStateBytes: p.KDAStateBytes, MLACacheBytesPerPosition: p.MLABytesPerPosition}
	if err := writeJSON("-", stdout, out); err != nil {
		return failed(stderr, exitRuntime, err)
	}
	return exitOK
}

// printPlan writes the memory figures a run depends on, before decoding starts.
func printPlan(w io.Writer, m *k3.Model, positions int) {
	in, p := m.Info(), m.Plan()
	how := "under the memory plan above" // the plan says what is pinned, streamed or cached
	if p.Mapped && p.Cache == nil {
		how = "memory-mapped"
	}
	fmt.Fprintf(w, "k3: weights %s %s (trunk %s, experts %s, embed+head %s); %d parameters\n",
		size(in.Bytes), how, size(in.Trunk.Bytes), size(in.Experts.Bytes), size(in.EmbedHead.Bytes), in.Params)
	fmt.Fprintf(w, "k3: session state: KDA %s, MLA latent cache %s/position (%s for %d positions)\n",
		size(p.KDAStateBytes), size(p.MLABytesPerPosition), size(p.MLABytesPerPosition*int64(positions)), positions)
}
