package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"sort"
	"strconv"
	"sync"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// ChecksumKey is the __metadata__ key of the optional per-tensor digests
// (§7.3): a JSON text holding a flat object {"<tensor>": "<hex
// SHA-256 of its data bytes>"}. A shard without it is unchecked; digests for
// tensors the shard does not hold are ignored.
const ChecksumKey = "colibri.sha256"

// MaxChecksumBytes bounds the ChecksumKey text of one shard (about 60 k
// entries of long names).
const MaxChecksumBytes = 16 << 20

var (
	// ErrChecksum: a tensor's data does not hash to the digest its shard
	// declares (flipped bits, a zeroed block, a changed file).
	ErrChecksum = errors.New("safetensors: tensor data does not match its " + ChecksumKey + " digest")
	// ErrChecksumFormat: the ChecksumKey text is not a JSON object of
	// 64-digit lower-case hex strings.
	ErrChecksumFormat = errors.New("safetensors: malformed " + ChecksumKey + " metadata")
)

// checksums is one shard's parsed ChecksumKey, built on first use.
type checksums struct {
	once sync.Once
	m    map[string][sha256.Size]byte
	err  error
}

// parseChecksums parses a ChecksumKey value.
func parseChecksums(text string) (map[string][sha256.Size]byte, error) {
	if len(text) > MaxChecksumBytes {
		return nil, errors.New(strconv.Itoa(len(text)) + " bytes, limit " + strconv.Itoa(MaxChecksumBytes))
	}
	root, err := strictjson.ParseLimits([]byte(text), strictjson.Limits{MaxBytes: MaxChecksumBytes})
	if err != nil {
		return nil, err
	}
	if root.Kind() != strictjson.Object {
		return nil, errors.New("not a JSON object")
	}
	out := make(map[string][sha256.Size]byte, root.Len())
	for _, m := range root.Members() {
		s, err := m.Value.Str()
		var sum [sha256.Size]byte
		if err == nil && len(s) == 2*sha256.Size && s == hex.EncodeToString(mustHex(s)) {
			copy(sum[:], mustHex(s))
			out[m.Key] = sum
			continue
		}
		return nil, errors.New("tensor " + strconv.Quote(m.Key) + ": not a 64-digit lower-case hex string")
	}
	return out, nil
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// Checksum returns the SHA-256 digest t's shard declares for it; ok is
// false when the shard declares none. A malformed ChecksumKey is an *Error
// wrapping ErrChecksumFormat that names the shard.
func (c *Checkpoint) Checksum(t *Tensor) (sum [sha256.Size]byte, ok bool, err error) {
	s, err := c.shardOf(t)
	if err != nil {
		return sum, false, err
	}
	s.sums.once.Do(func() {
		if text, has := s.meta[ChecksumKey]; has {
			s.sums.m, s.sums.err = parseChecksums(text)
		}
	})
	if s.sums.err != nil {
		return sum, false, &Error{File: s.path, Pos: -1, Err: ErrChecksumFormat, Detail: s.sums.err.Error()}
	}
	sum, ok = s.sums.m[t.Name]
	return sum, ok, nil
}

// verifyChunk is the read size of VerifyTensor: large enough to stream at
// disk speed, small enough to stay off the critical memory budget.
const verifyChunk = 8 << 20

// VerifyTensor hashes t's bytes, read from the file now (buffered reads,
// not the mapping), and compares them with the digest its shard declares.
// checked is false, with a nil error, when there is no digest. A mismatch
// is an *Error wrapping ErrChecksum naming the shard and the tensor; a
// file that ends early is ErrShortRead.
func (c *Checkpoint) VerifyTensor(t *Tensor) (checked bool, err error) {
	want, ok, err := c.Checksum(t)
	if err != nil || !ok {
		return false, err
	}
	h := sha256.New()
	buf := make([]byte, min(t.Size, verifyChunk))
	for off := int64(0); off < t.Size; {
		n := min(int64(len(buf)), t.Size-off)
		if err := c.ReadAt(t, buf[:n], off); err != nil {
			return true, err
		}
		h.Write(buf[:n])
		off += n
	}
	var got [sha256.Size]byte
	h.Sum(got[:0])
	if got != want {
		return true, newErr(t.File, t.Name, -1, ErrChecksum,
			"declared "+hex.EncodeToString(want[:])+", data hashes to "+hex.EncodeToString(got[:]))
	}
	return true, nil
}

// ChecksumMetadata returns the ChecksumKey value for tensors (compact JSON,
// sorted keys), to be passed in a writer's metadata. Tensors without Data
// are hashed by running their Fill.
func ChecksumMetadata(tensors []WriteTensor) (string, error) {
	type kv struct{ name, sum string }
	all := make([]kv, 0, len(tensors))
	for _, t := range tensors {
		h := sha256.New()
		switch {
		case t.Data != nil:
			h.Write(t.Data)
		case t.Fill != nil:
			if err := t.Fill(h); err != nil {
				return "", err
			}
		}
		all = append(all, kv{t.Name, hex.EncodeToString(h.Sum(nil))})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range all {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strictjson.AppendQuote(nil, e.name))
		b.WriteByte(':')
		b.Write(strictjson.AppendQuote(nil, e.sum))
	}
	b.WriteByte('}')
	return b.String(), nil
}
