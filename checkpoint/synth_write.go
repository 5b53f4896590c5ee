package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/safetensors"
)

// blockElems bounds the elements generated per write for large BF16 matrices.
const blockElems = 1 << 22

// writeSynth generates geometry g with the given seed into dir (created if needed; it must be
// empty): config.json, the shards and their index, no tokenizer. progress, if not nil, receives
// after each tensor whose data is generated the bytes generated so far and the total to generate
// (holes of sparse geometries are not counted).
//
// Output is a pure function of (geometry, seed): every tensor draws from its own stream
// (newNormals), so the bytes depend neither on the machine nor on the parallelism. Shards are
// streamed tensor by tensor through the safetensors writer's Fill callbacks; tensors are drawn a
// few at a time ahead of the writer on GOMAXPROCS goroutines, and the largest ones (the embedding
// and lm_head) are streamed in blocks of rows, so memory stays bounded. Sparse geometries write
// headers only: their data stay holes (zeros) in sparse files.
func writeSynth(dir string, g geometry, seed int64, progress func(done, total int64)) error {
	cfg := g.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if g.Shards < 1 {
		return fmt.Errorf("%d shards", g.Shards)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return err
	} else if len(ents) > 0 {
		return fmt.Errorf("%w: %s holds %d entries", ErrDirNotEmpty, dir, len(ents))
	}
	units, err := synthPlan(&cfg, g.Released)
	if err != nil {
		return err
	}
	shards := shardUnits(units, g.Shards)
	ws := make([][]safetensors.WriteTensor, len(shards))
	var pf *prefetcher
	if !g.Sparse {
		pf = startPrefetch(shards, seed)
		defer pf.stop()
	}
	for i, sh := range shards {
		if len(sh) == 0 {
			return fmt.Errorf("shard %d of %d would be empty", i+1, len(shards))
		}
		ws[i] = make([]safetensors.WriteTensor, len(sh))
		var pendingScales []byte // scales of the expert matrix whose packed codes were just written
		for j := range sh {
			s := &sh[j]
			wt := safetensors.WriteTensor{Name: s.name, DType: s.dtype, Shape: s.shape}
			if g.Sparse && g.Routing && routes(s) {
				wt.Fill = func(w io.Writer) error { return draw(w, s, seed) }
			}
			if !g.Sparse {
				switch s.kind {
				case kindPacked:
					wt.Fill = func(w io.Writer) error {
						r, ok := pf.take(s)
						if !ok {
							r = drawOne(s, seed)
						}
						if r.err != nil {
							return r.err
						}
						pendingScales = r.scales
						_, err := w.Write(r.data)
						return err
					}
				case kindScale:
					// The writer emits tensors in order and the plan puts each scale right after
					// its packed codes, so the scales drawn with them are waiting here.
					wt.Fill = func(w io.Writer) error {
						if int64(len(pendingScales)) != s.bytes() {
							return fmt.Errorf("%s: scales not produced by the preceding packed tensor", s.name)
						}
						_, err := w.Write(pendingScales)
						pendingScales = nil
						return err
					}
				default:
					wt.Fill = func(w io.Writer) error {
						r, ok := pf.take(s)
						if !ok {
							return draw(w, s, seed) // large: streamed in blocks
						}
						if r.err != nil {
							return r.err
						}
						_, err := w.Write(r.data)
						return err
					}
				}
			}
			ws[i][j] = wt
		}
	}
	if progress != nil {
		var total, done int64
		for i := range ws {
			for j := range ws[i] {
				if ws[i][j].Fill != nil {
					total += shards[i][j].bytes()
				}
			}
		}
		for i := range ws {
			for j := range ws[i] {
				wt := &ws[i][j]
				if fill, n := wt.Fill, shards[i][j].bytes(); fill != nil {
					wt.Fill = func(w io.Writer) error {
						err := fill(w)
						if err == nil {
							done += n
							progress(done, total)
						}
						return err
					}
				}
			}
		}
	}
	meta := map[string]string{"format": "pt", "generator": "k3 synth", "geometry": g.Name, "seed": fmt.Sprint(seed)}
	if err := safetensors.WriteSharded(dir, ws, meta); err != nil {
		return err
	}
	return writeConfig(filepath.Join(dir, "config.json"), &cfg)
}

// routes reports whether s is written with real values in a Routing geometry: the embedding,
// the router's gate and bias, and every tensor that is not a matrix (gains, AttnRes vectors,
// KDA vectors and convolution taps). Expert codes and projections stay holes.
func routes(s *spec) bool {
	switch {
	case s.kind == kindPacked || s.kind == kindScale:
		return false
	case s.name == layout.EmbedName, s.key == "block_sparse_moe.gate.weight":
		return true
	}
	return len(s.shape) != 2 || s.shape[0] == 1
}

// drawExpert draws one routed-expert matrix and quantises it with the oracle's rule.
func drawExpert(s *spec, seed int64) (packed, scales []byte, err error) {
	rng := newNormals(seed, s.name)
	w := make([]float32, s.rows*s.cols)
	for i := range w {
		w[i] = float32(s.std * rng.next())
	}
	packed, scales, err = mxfp4.Quantize(w, s.rows, s.cols)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return packed, scales, nil
}

// draw streams one BF16 or F32 tensor's values to w, at most blockElems at a time.
func draw(w io.Writer, s *spec, seed int64) error {
	rng := newNormals(seed, s.name)
	n := int(s.bytes()) / (s.dtype.Bits() / 8)
	if s.kind == kindALog {
		// Rates spread over [-1, 1] so heads decay at visibly different speeds; entries past H
		// are the zero padding of the released layout.
		v := make([]float32, n)
		for h := 0; h < s.heads && h < n; h++ {
			v[h] = float32(-1 + float64(2*rng.uniform()))
		}
		return writeF32(w, v)
	}
	next := func() float32 {
		z := float64(s.std * rng.next()) // the conversion forbids fusing into 1 + std·x (same bytes on arm64)
		if s.kind == kindGain {
			z += 1
		}
		return float32(z)
	}
	switch s.dtype {
	case safetensors.F32:
		v := make([]float32, n)
		for i := range v {
			v[i] = next()
		}
		return writeF32(w, v)
	case safetensors.BF16:
		buf := make([]byte, 2*min(n, blockElems))
		for done := 0; done < n; {
			k := min(n-done, blockElems)
			for i := 0; i < k; i++ {
				binary.LittleEndian.PutUint16(buf[2*i:], quant.F32ToBF16(next()))
			}
			if _, err := w.Write(buf[:2*k]); err != nil {
				return err
			}
			done += k
		}
		return nil
	}
	return fmt.Errorf("%s: no generator for dtype %v", s.name, s.dtype)
}

func writeF32(w io.Writer, v []float32) error {
	buf := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
	}
	_, err := w.Write(buf)
	return err
}

// writeConfig writes the nested (released) config.json through the config package's writer.
func writeConfig(path string, c *config.Config) error {
	b, err := config.MarshalNested(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
