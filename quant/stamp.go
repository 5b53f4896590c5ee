package quant

import (
	"errors"
	"fmt"
	"sort"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// StampKey is the safetensors __metadata__ key holding the format stamps
// (shared with Colibrì): a JSON text of a flat object {"<tensor>": "<format
// name>"}.
const StampKey = "colibri.fmt"

// MaxStampEntries is the largest number of entries a shard's stamp may hold.
const MaxStampEntries = 4096

// StampError reports a shard's stamp that cannot be ingested (§6.8): not
// a JSON object, a non-string entry, a duplicate key, too many entries. It
// matches ErrStamp.
type StampError struct {
	Shard  string
	Reason string
}

func (e *StampError) Error() string {
	return fmt.Sprintf("quant: shard %s: %s: %s", e.Shard, StampKey, e.Reason)
}

// Unwrap makes errors.Is(err, ErrStamp) true.
func (e *StampError) Unwrap() error { return ErrStamp }

// StampConflictError reports a tensor stamped differently by two shards;
// first-wins would make results depend on directory order. It matches
// ErrStamp.
type StampConflictError struct {
	Tensor          string
	ShardA, FormatA string
	ShardB, FormatB string
}

func (e *StampConflictError) Error() string {
	return fmt.Sprintf("quant: tensor %q: conflicting stamps: %s says %q, %s says %q",
		e.Tensor, e.ShardA, e.FormatA, e.ShardB, e.FormatB)
}

// Unwrap makes errors.Is(err, ErrStamp) true.
func (e *StampConflictError) Unwrap() error { return ErrStamp }

// MaxStampBytes bounds the stamp text of one shard: MaxStampEntries entries
// of long tensor names fit many times over, and the parse tree it becomes is
// bounded with it.
const MaxStampBytes = 4 << 20

// ParseStamp parses the value of StampKey from one shard. Format names are
// not checked here (an unknown name is refused per tensor by Resolve, naming
// the tensor). The text is read by internal/fileio/strictjson, so it must be
// exactly one strict JSON object: valid UTF-8, no lone surrogate escapes
// (which a lenient decoder maps to U+FFFD, letting distinct names collide),
// no duplicate keys, nothing after the object. It also refuses, naming the
// shard, an entry whose value is not a string, more than MaxStampEntries
// entries and more than MaxStampBytes bytes.
func ParseStamp(shard, text string) (map[string]string, error) {
	bad := func(format string, a ...any) error {
		return &StampError{Shard: shard, Reason: fmt.Sprintf(format, a...)}
	}
	if len(text) > MaxStampBytes {
		return nil, bad("%d bytes, more than %d", len(text), MaxStampBytes)
	}
	root, err := strictjson.ParseLimits([]byte(text), strictjson.Limits{MaxBytes: MaxStampBytes})
	if err != nil {
		var se *strictjson.Error
		if errors.Is(err, strictjson.ErrDuplicateKey) && errors.As(err, &se) {
			return nil, bad("a tensor appears twice: %v", err)
		}
		return nil, bad("not strict JSON: %v", err)
	}
	if root.Kind() != strictjson.Object {
		return nil, bad("not a JSON object (%s)", root.Kind())
	}
	if root.Len() > MaxStampEntries {
		return nil, bad("more than %d entries", MaxStampEntries)
	}
	out := make(map[string]string, root.Len())
	for _, m := range root.Members() {
		val, err := m.Value.Str()
		if err != nil {
			return nil, bad("tensor %q: value is %s, not a string", m.Key, m.Value.Kind())
		}
		out[m.Key] = val
	}
	return out, nil
}

type stampEntry struct{ format, shard string }

// Stamps holds the merged stamps of a checkpoint. The zero value and a nil
// *Stamps hold none (an unstamped checkpoint is normal).
type Stamps struct {
	m map[string]stampEntry
}

// LoadStamps ingests the __metadata__ maps of every shard (shard name →
// metadata), in sorted shard order so that errors do not depend on map
// order. A shard without StampKey is unstamped.
func LoadStamps(meta map[string]map[string]string) (*Stamps, error) {
	shards := make([]string, 0, len(meta))
	for sh := range meta {
		shards = append(shards, sh)
	}
	sort.Strings(shards)
	s := &Stamps{}
	for _, sh := range shards {
		if err := s.Add(sh, meta[sh]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add parses shard's metadata stamp and merges it: agreeing duplicates
// collapse, a tensor stamped differently by two shards is a
// *StampConflictError naming both. Stamps for tensors the shard does not hold
// and incomplete coverage are tolerated. On error s is unchanged.
func (s *Stamps) Add(shard string, meta map[string]string) error {
	text, ok := meta[StampKey]
	if !ok {
		return nil
	}
	m, err := ParseStamp(shard, text)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if old, ok := s.m[k]; ok && old.format != m[k] {
			return &StampConflictError{Tensor: k, ShardA: old.shard, FormatA: old.format, ShardB: shard, FormatB: m[k]}
		}
	}
	if s.m == nil {
		s.m = make(map[string]stampEntry, len(m))
	}
	for _, k := range keys {
		if _, ok := s.m[k]; !ok {
			s.m[k] = stampEntry{format: m[k], shard: shard}
		}
	}
	return nil
}

// Lookup returns the format name stamped on tensor and the shard that first
// stamped it.
func (s *Stamps) Lookup(tensor string) (format, shard string, ok bool) {
	if s == nil {
		return "", "", false
	}
	e, ok := s.m[tensor]
	return e.format, e.shard, ok
}

// Len returns the number of stamped tensors.
func (s *Stamps) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Resolve is the package-level Resolve with tensor's stamp looked up in s. A
// stamp that is present but empty is an unknown format, not "unstamped".
func (s *Stamps) Resolve(tensor string, O, I int, weight TensorDesc, scale *TensorDesc) (Format, int, error) {
	stamp, _, ok := s.Lookup(tensor)
	if ok && stamp == "" {
		return 0, 0, &ErrStampUnknown{Tensor: tensor, Stamped: stamp, Inferred: inferredNames(tensor, O, I, weight, scale)}
	}
	return Resolve(tensor, O, I, weight, scale, stamp)
}

// Verify checks a stamp against an unambiguous inferred format (§6.8)
// (Resolve already does this, and refuses coded stamps before inference)
// for callers that inferred the format themselves: "" accepts, the inferred
// name (or, for a coded stamp, its base format) accepts, an unknown name is
// *ErrStampUnknown, any other known name *ErrStampMismatch.
func Verify(tensor, stamp string, inferred Format) error {
	if stamp == "" {
		return nil
	}
	f, err := ParseFormat(stamp)
	if err != nil {
		return &ErrStampUnknown{Tensor: tensor, Stamped: stamp, Inferred: inferred.String()}
	}
	if f == inferred || (f.Coded() && f.Base() == inferred) {
		return nil
	}
	return &ErrStampMismatch{Tensor: tensor, Stamped: stamp, Inferred: inferred.String()}
}

// ResolvePair is Resolve for a weight tensor and its scale tensor (scaleName
// "" and scale nil when there is none), checking the scale tensor's own
// stamp first: the only format a scale tensor may be stamped with is
// mxfp4-scale-cfs1, a CFS1 record that must be decoded with
// DecodeScaleRecord before byte counts mean anything (*CodedError); an
// unknown name is *ErrStampUnknown and any other known name
// *ErrStampMismatch.
func (s *Stamps) ResolvePair(weightName, scaleName string, O, I int, weight TensorDesc, scale *TensorDesc) (Format, int, error) {
	if scaleName != "" {
		if st, _, ok := s.Lookup(scaleName); ok {
			f, err := ParseFormat(st)
			switch {
			case err != nil:
				return 0, 0, &ErrStampUnknown{Tensor: scaleName, Stamped: st, Inferred: "a raw scale tensor"}
			case f == MXFP4ScaleCFS1:
				return 0, 0, &CodedError{Tensor: scaleName, Format: st}
			default:
				return 0, 0, &ErrStampMismatch{Tensor: scaleName, Stamped: st, Inferred: "a raw scale tensor"}
			}
		}
	}
	return s.Resolve(weightName, O, I, weight, scale)
}
