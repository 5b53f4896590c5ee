package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
)

// Identity is a model's identity by content (§3.6): the SHA-256 of its configuration digest and,
// for every text-model tensor but the routed experts in name order, its name, dtype, shape and
// fixed samples of its bytes. Two checkpoints of one geometry with different weights differ in
// it; a copy whose routed experts are re-coded (quant/rans Repack) keeps it.
type Identity [sha256.Size]byte

// String returns the identity as 64 lowercase hex digits, the form files carry.
func (id Identity) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero value (no identity).
func (id Identity) IsZero() bool { return id == Identity{} }

// ErrIdentity reports an identity string that is not 64 lowercase hex digits.
var ErrIdentity = errors.New("checkpoint: malformed model identity")

// ParseIdentity parses the form String returns.
func ParseIdentity(s string) (Identity, error) {
	var id Identity
	if len(s) != 2*len(id) || strings.ToLower(s) != s {
		return id, fmt.Errorf("%w: %q is not %d lowercase hex digits", ErrIdentity, s, 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%w: %q: %w", ErrIdentity, s, err)
	}
	return id, nil
}

// Sampling of §3.6: a tensor of at most identityWhole bytes is hashed whole; a larger one by
// identityPages pages of identityPage bytes at offsets relative to the tensor's start (so a copy
// that moves tensors between shards or within one keeps the identity).
const (
	identityPage  = 4096
	identityPages = 3
	identityWhole = identityPages * identityPage
)

// identitySamples returns the tensor-relative offsets of the pages sampled from a tensor of
// size bytes (> identityWhole): the first page, the middle one and the last, page-aligned
// except the last, which ends with the tensor.
func identitySamples(size int64) [identityPages]int64 {
	return [identityPages]int64{0, (size / 2) &^ (identityPage - 1), size - identityPage}
}

// IdentityStats says what computing an identity cost.
type IdentityStats struct {
	Tensors int   // tensors hashed
	Reads   int   // reads issued
	Bytes   int64 // tensor bytes read
}

// Identify computes the checkpoint's identity (§3.6) from cfg and ck's dense tensors. It reads
// at most three 4 KiB pages of each tensor, with buffered reads of the shards.
func Identify(ck *safetensors.Checkpoint, cfg *config.Config) (Identity, IdentityStats, error) {
	var st IdentityStats
	var ts []*safetensors.Tensor
	for _, t := range ck.Tensors() {
		if c, ok := layout.Classify(t.Name); ok && c != layout.Experts {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *safetensors.Tensor) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	var b [8]byte
	put := func(x uint64) { binary.LittleEndian.PutUint64(b[:], x); h.Write(b[:]) }
	str := func(s string) { put(uint64(len(s))); io.WriteString(h, s) }
	d := cfg.Digest()
	h.Write(d[:])
	put(uint64(len(ts)))
	buf := make([]byte, identityWhole)
	read := func(t *safetensors.Tensor, p []byte, off int64) error {
		if err := ck.ReadAt(t, p, off); err != nil {
			return fmt.Errorf("checkpoint: identity: %w", err)
		}
		st.Reads++
		st.Bytes += int64(len(p))
		h.Write(p)
		return nil
	}
	for _, t := range ts {
		str(t.Name)
		str(t.DType.String())
		put(uint64(len(t.Shape)))
		for _, n := range t.Shape {
			put(uint64(n))
		}
		put(uint64(t.Size))
		if t.Size <= identityWhole {
			if err := read(t, buf[:t.Size], 0); err != nil {
				return Identity{}, st, err
			}
		} else {
			for _, off := range identitySamples(t.Size) {
				if err := read(t, buf[:identityPage], off); err != nil {
					return Identity{}, st, err
				}
			}
		}
		st.Tensors++
	}
	var id Identity
	h.Sum(id[:0])
	return id, st, nil
}
