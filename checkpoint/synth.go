package checkpoint

import (
	"errors"
	"fmt"
)

// ErrUnknownGeometry: Synthesize was given a geometry name Geometries does
// not list.
var ErrUnknownGeometry = errors.New("checkpoint: unknown synthetic geometry")

// ErrDirNotEmpty: Synthesize was given a directory that already holds files; it never mixes with
// or overwrites an existing checkpoint. Synthesize's error reads "checkpoint: synthesize: synth:
// target directory is not empty: …", as it did when synthesis was a package of its own.
var ErrDirNotEmpty = errors.New("synth: target directory is not empty")

// GeometryInfo names a synthetic checkpoint shape accepted by Synthesize.
type GeometryInfo struct {
	Name        string
	Description string
}

// Geometries lists the shapes Synthesize can write: "tiny" (the models/tiny fixture's shape),
// "perf" (a benchmark shape of about 1.5 GB) and "k3" (the real model's shapes as sparse files).
func Geometries() []GeometryInfo {
	var out []GeometryInfo
	for _, g := range knownGeometries() {
		out = append(out, GeometryInfo{Name: g.Name, Description: g.Description})
	}
	return out
}

// Synthesize writes a random checkpoint of the named geometry into dir (created if needed; it must
// be empty) in the released layout: nested config.json, shards plus model.safetensors.index.json,
// BF16 matrices, F32 small vectors and MXFP4 routed experts; and a Kimi-layout tokenizer sized to
// the vocabulary (tiktoken.model and tokenizer_config.json, see SynthTokenizerRanks), so text
// prompts work. Everything is written into a staging directory beside dir and renamed into place:
// dir never holds a partial checkpoint, and a rerun after an interruption starts afresh. The bytes
// are a pure function of (geometry, seed). Weights are scaled so that SiTU-GLU caps saturate and the router bias changes
// expert selections, so the result exercises every part of the forward pass.
func Synthesize(dir, geometry string, seed int64) error {
	return SynthesizeProgress(dir, geometry, seed, nil)
}

// SynthesizeProgress is Synthesize reporting, after each generated tensor, the bytes generated so
// far and the total (the holes of the sparse geometries take no time and are not counted).
func SynthesizeProgress(dir, geometry string, seed int64, progress func(done, total int64)) error {
	g, ok := lookupGeometry(geometry)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownGeometry, geometry)
	}
	return synthesize(dir, g, seed, progress)
}
