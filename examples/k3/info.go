package main

import (
	"fmt"
	"io"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/quant/lossless12"
)

var infoCmd = command{name: "info", npos: 1, what: "exactly one model directory", main: info,
	flags: flagSpec{"--trunk-stats": false}, help: `usage: k3 info <model_dir> [--trunk-stats]

Binds the model and prints, as JSON: layers, vocab, hidden; parameter, tensor and byte counts
for the embedding/head, the trunk and the routed experts; the per-session KDA state bytes and
MLA latent-cache bytes per position. Keys are snake_case like the run report's.

  --trunk-stats  instead, read every bf16 matrix of the trunk, the embedding and the output head
                 and print what "k3 pack-trunk --format lossless12" would make of each, without
                 writing anything: a table (bits per weight, × bf16, escape rate, exponent
                 entropy, sizes) and a total line (the entropy averaged over the weights)
  -h, --help     this help
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
	if a.has("--trunk-stats") {
		return trunkStats(a.pos[0], stdout, stderr)
	}
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

// trunkStats prints checkpoint.MeasureLossless12's statistics of the model in dir: a line per
// matrix and a total.
func trunkStats(dir string, stdout, stderr io.Writer) int {
	stats, err := checkpoint.MeasureLossless12(dir)
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	w := len("tensor")
	for _, s := range stats {
		w = max(w, len(s.Name))
	}
	const row = "%-*s  %-14s  %11s  %7s  %7s  %11s  %12s  %9s  %10s\n"
	fmt.Fprintf(stdout, row, w, "tensor", "shape", "bits/weight", "× bf16", "escapes", "escape rate", "exp. entropy", "bf16", "lossless12")
	var sum lossless12.Stats
	var weights int64
	var entropy float64
	for _, s := range stats {
		fmt.Fprintf(stdout, row, w, s.Name, fmt.Sprintf("[%d, %d]", s.Rows, s.Cols), fmt.Sprintf("%.3f", s.BitsPerWeight()),
			fmt.Sprintf("%.4f", s.Ratio()), fmt.Sprint(s.Escapes), fmt.Sprintf("%.4f%%", 100*s.EscapeRate()),
			fmt.Sprintf("%.3f", s.ExponentEntropy), size(s.BF16Bytes), size(s.Bytes))
		sum.Bytes += s.Bytes
		sum.BF16Bytes += s.BF16Bytes
		sum.Escapes += s.Escapes
		weights += s.Weights()
		entropy += s.ExponentEntropy * float64(s.Weights())
	}
	if weights == 0 {
		fmt.Fprintf(stdout, "total: no bf16 matrix of the trunk, the embedding or the head in %s\n", dir)
		return exitOK
	}
	fmt.Fprintf(stdout, "total: %d matrices, %d weights: %.3f bits/weight (%.4f× bf16), escape rate %.4f%%, exponent entropy %.3f bits; %s in bf16, %s in lossless12\n",
		len(stats), weights, 8*float64(sum.Bytes)/float64(weights), sum.Ratio(), 100*float64(sum.Escapes)/float64(weights),
		entropy/float64(weights),
		size(sum.BF16Bytes), size(sum.Bytes))
	return exitOK
}
