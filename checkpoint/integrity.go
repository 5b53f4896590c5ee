package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/kernels/floatbits"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// Sentinel errors of the pre-bind integrity checks (errors.Is).
var (
	// ErrExtraLayers: the checkpoint holds tensors of decoder layers the
	// configuration does not declare; running the declared prefix would
	// decode fluent but wrong text.
	ErrExtraLayers = errors.New("checkpoint: layers beyond the configuration")
	// ErrRelabelled: a BF16 or F16 matrix whose bits read as the other
	// 16-bit float (a relabelled dtype decodes as garbage).
	ErrRelabelled = errors.New("checkpoint: tensor bits contradict their 16-bit float dtype")
)

// ExtraLayersError names the decoder layers the checkpoint holds beyond
// num_hidden_layers. It matches ErrExtraLayers.
type ExtraLayersError struct {
	Dir      string // the checkpoint directory
	Declared int    // num_hidden_layers
	Layers   []int  // zero-based indices of the extra layers, ascending
	Tensors  int    // tensors belonging to them
}

func (e *ExtraLayersError) Error() string {
	// Dir is left out: the caller that opened the directory names it.
	return fmt.Sprintf("checkpoint: config declares %d layers but the checkpoint holds %d tensor(s) of %d more (layers %s); "+
		"fix num_hidden_layers or remove the tensors", e.Declared, e.Tensors, len(e.Layers), layerList(e.Layers))
}

// Unwrap makes errors.Is(err, ErrExtraLayers) true.
func (e *ExtraLayersError) Unwrap() error { return ErrExtraLayers }

func layerList(l []int) string {
	var b strings.Builder
	for i, v := range l {
		if i == 8 {
			fmt.Fprintf(&b, " … %d", l[len(l)-1])
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	return b.String()
}

// CheckOptions select the optional integrity checks of Check.
type CheckOptions struct {
	// Verify hashes every model tensor whose shard declares a colibri.sha256
	// digest (§7.3) and refuses the checkpoint on the first mismatch
	// (safetensors.ErrChecksum, naming shard and tensor). It reads every
	// stamped byte once, so it is opt-in: on K3 that is terabytes.
	Verify bool
	// ExtraLayers reports layers beyond num_hidden_layers in the Report
	// instead of refusing them with an *ExtraLayersError, for a caller that
	// runs fewer layers on purpose.
	ExtraLayers bool
	// Layers is the number of decoder layers the caller will run (0: all
	// the configured ones); Report.SkippedTensors counts the tensors of the
	// others.
	Layers int
	// Identify computes the model's identity (§3.6) into Report.Identity:
	// a few 4 KiB reads per dense tensor.
	Identify bool
}

// Report says what Check checked beyond structure and what it cost.
type Report struct {
	// ExtraLayers: zero-based layers present in the checkpoint beyond the
	// config (only with CheckOptions.ExtraLayers; otherwise Check refused
	// them).
	ExtraLayers []int
	// SkippedTensors: tensors of the layers at or beyond CheckOptions.Layers,
	// which a caller running fewer layers leaves unbound.
	SkippedTensors int
	// StampedTensors: model tensors with a colibri.fmt stamp, all verified.
	StampedTensors int
	// VerifiedTensors and VerifiedBytes: tensors hashed against their
	// colibri.sha256 digest (CheckOptions.Verify), and their bytes.
	VerifiedTensors int
	VerifiedBytes   int64
	// UncheckedTensors: model tensors without a digest (CheckOptions.Verify).
	UncheckedTensors int
	// VerifySeconds: wall time spent hashing.
	VerifySeconds float64
	// Identity is the model's identity by content (§3.6), with
	// CheckOptions.Identify; IdentitySeconds what computing it took.
	Identity        Identity
	IdentitySeconds float64
}

// Check runs the integrity checks that need the configuration and the
// opened checkpoint but no bound weight, in the order that keeps a hostile
// input cheap: tensor counts first (before a binder allocates anything per
// layer or per expert), then layers beyond the config, format stamps,
// relabelled 16-bit floats and, when asked, digests. dir only names the
// checkpoint in an *ExtraLayersError.
func Check(dir string, ck *safetensors.Checkpoint, cfg *config.Config, o CheckOptions) (Report, error) {
	c := &checker{dir: dir, ck: ck, cfg: cfg}
	if err := cfg.CheckAgainst(ck.Listed()); err != nil {
		return c.rep, err
	}
	if err := c.checkLayers(o); err != nil {
		return c.rep, err
	}
	if err := c.checkStamps(); err != nil {
		return c.rep, err
	}
	if err := c.checkRelabelled(); err != nil {
		return c.rep, err
	}
	if o.Identify {
		t0 := time.Now()
		id, _, err := Identify(ck, cfg)
		if err != nil {
			return c.rep, err
		}
		c.rep.Identity, c.rep.IdentitySeconds = id, time.Since(t0).Seconds()
	}
	if o.Verify {
		if err := c.verifyDigests(); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

// checker holds one Check's inputs and the report it fills.
type checker struct {
	dir string
	ck  *safetensors.Checkpoint
	cfg *config.Config
	rep Report
}

// checkLayers refuses (or, when allowed, records) layers beyond the config.
func (c *checker) checkLayers(o CheckOptions) error {
	var extra []int
	tensors := 0
	for _, t := range c.ck.Tensors() {
		l, ok := layout.LayerOf(t.Name)
		if !ok {
			continue
		}
		if o.Layers > 0 && l >= o.Layers {
			c.rep.SkippedTensors++
		}
		if l >= c.cfg.NumLayers {
			tensors++
			if i, found := slices.BinarySearch(extra, l); !found {
				extra = slices.Insert(extra, i, l)
			}
		}
	}
	if len(extra) == 0 {
		return nil
	}
	if o.ExtraLayers {
		c.rep.ExtraLayers = extra
		return nil
	}
	return &ExtraLayersError{Dir: c.dir, Declared: c.cfg.NumLayers, Layers: extra, Tensors: tensors}
}

// checkStamps ingests every shard's colibri.fmt (§6.8: malformed,
// oversized and conflicting stamps are refused naming the shard) and
// verifies each stamped model tensor against the format its bytes imply,
// with quant's TRUST-VERIFY-REFUSE: unknown names, known names the bytes
// contradict and coded formats (which this engine does not bind) refuse.
func (c *checker) checkStamps() error {
	stamps, err := quant.LoadStamps(c.ck.Metadata())
	if err != nil || stamps.Len() == 0 {
		return err
	}
	for _, t := range c.ck.Tensors() {
		if !strings.HasPrefix(t.Name, layout.TextPrefix) {
			continue
		}
		if base, ok := strings.CutSuffix(t.Name, ".weight_packed"); ok {
			if err := c.checkPairStamp(stamps, t, base); err != nil {
				return err
			}
			continue
		}
		if strings.HasSuffix(t.Name, ".weight_scale") {
			continue // checked with its weight_packed
		}
		stamp, _, ok := stamps.Lookup(t.Name)
		if !ok {
			continue
		}
		c.rep.StampedTensors++
		O, I := logicalShape(t.Shape)
		if _, _, err := quant.Resolve(t.Name, O, I, quant.TensorDesc{DType: t.DType.String(), NBytes: t.Size}, nil, stamp); err != nil {
			return err
		}
		if stamp == "" {
			return &quant.ErrStampUnknown{Tensor: t.Name, Stamped: stamp, Inferred: strings.ToLower(t.DType.String())}
		}
	}
	return nil
}

// checkPairStamp verifies the stamps of an MXFP4 weight_packed /
// weight_scale pair (stamped under either the packed tensor's name or the
// pair's base name).
func (c *checker) checkPairStamp(stamps *quant.Stamps, packed *safetensors.Tensor, base string) error {
	scale, ok := c.ck.Tensor(base + ".weight_scale")
	if !ok || len(packed.Shape) != 2 {
		return nil // the binder names what is missing or mis-shaped
	}
	name := packed.Name
	_, _, stamped := stamps.Lookup(name)
	if _, _, ok := stamps.Lookup(base); ok && !stamped {
		name, stamped = base, true
	}
	_, _, scaleStamped := stamps.Lookup(scale.Name)
	if !stamped && !scaleStamped {
		return nil
	}
	c.rep.StampedTensors++
	O, I := int(packed.Shape[0]), 2*int(packed.Shape[1])
	sd := quant.TensorDesc{DType: scale.DType.String(), NBytes: scale.Size}
	_, _, err := stamps.ResolvePair(name, scale.Name, O, I, quant.TensorDesc{DType: packed.DType.String(), NBytes: packed.Size}, &sd)
	return err
}

// logicalShape views a tensor as [O, I]: rank 1 as [1, n], higher ranks as
// [shape[0], rest].
func logicalShape(s []int64) (int, int) {
	if len(s) == 0 {
		return 1, 1
	}
	if len(s) == 1 {
		return 1, int(min(s[0], math.MaxInt32))
	}
	rest := int64(1)
	for _, d := range s[1:] {
		rest = min(rest*max(d, 0), math.MaxInt32)
	}
	return int(min(s[0], math.MaxInt32)), int(rest)
}

// relabelSample is the number of elements sampled per 16-bit matrix: one
// 2 KiB read from the middle of the tensor.
const relabelSample = 1024

// checkRelabelled refuses a BF16 matrix stored as F16 or the reverse. Both
// are 2 bytes per element, so shape checks pass and the binder accepts
// either as "some float". The bits tell them apart for weight matrices: a
// BF16 weight read as F16 keeps only the top five exponent bits, so every
// nonzero value lands within a few binades of 1 (no small values at all);
// an F16 weight read as BF16 spreads over dozens of binades (most values
// vanishingly small next to the largest). Genuine weights of either dtype
// have a sizeable share of values below 1/16 of the largest and almost
// none below 2^-24 of it.
func (c *checker) checkRelabelled() error {
	buf := make([]byte, 2*relabelSample)
	for _, t := range c.ck.Tensors() {
		if len(t.Shape) != 2 || t.DType != safetensors.BF16 && t.DType != safetensors.F16 ||
			t.NumElements() < relabelSample || !strings.HasPrefix(t.Name, layout.TextPrefix) {
			continue
		}
		off := (t.Size/2 - int64(len(buf))/2) &^ 1
		if err := c.ck.ReadAt(t, buf, off); err != nil {
			return err
		}
		if why := relabelled(buf, t.DType); why != "" {
			other := "F16"
			if t.DType == safetensors.F16 {
				other = "BF16"
			}
			return fmt.Errorf("%w: tensor %q (%s) in %s: %s; the data looks like %s", ErrRelabelled, t.Name, t.DType, t.File, why, other)
		}
	}
	return nil
}

// relabelled judges a sample of 16-bit values stored as d and returns why
// they cannot be d, or "".
func relabelled(b []byte, d safetensors.DType) string {
	vals := make([]float64, 0, len(b)/2)
	peak := 0.0
	for i := 0; i+1 < len(b); i += 2 {
		h := binary.LittleEndian.Uint16(b[i:])
		// Both widenings are exact; NaN and infinities are skipped below.
		var v float64
		if d == safetensors.BF16 {
			v = float64(floatbits.BF16(h))
		} else {
			v = float64(floatbits.F16(h))
		}
		v = math.Abs(v)
		if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		vals = append(vals, v)
		peak = max(peak, v)
	}
	if len(vals) < relabelSample/4 {
		return "" // mostly zeros: nothing to judge
	}
	var small, tiny int
	for _, v := range vals {
		if v < peak/16 {
			small++
		}
		if v < peak*0x1p-24 {
			tiny++
		}
	}
	n := len(vals)
	switch {
	case d == safetensors.F16 && small*200 < n:
		return fmt.Sprintf("only %d of %d sampled values are below 1/16 of the largest (%g)", small, n, peak)
	case d == safetensors.BF16 && tiny*20 > n:
		return fmt.Sprintf("%d of %d sampled values are below 2^-24 of the largest (%g)", tiny, n, peak)
	}
	return ""
}

// verifyDigests hashes every model tensor that has a colibri.sha256 digest.
func (c *checker) verifyDigests() error {
	start := time.Now()
	defer func() { c.rep.VerifySeconds = time.Since(start).Seconds() }()
	for _, t := range c.ck.Tensors() {
		if !strings.HasPrefix(t.Name, layout.TextPrefix) {
			continue
		}
		checked, err := c.ck.VerifyTensor(t)
		if err != nil {
			return err
		}
		if !checked {
			c.rep.UncheckedTensors++
			continue
		}
		c.rep.VerifiedTensors++
		c.rep.VerifiedBytes += t.Size
	}
	return nil
}
