package k3

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"strings"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/sample"
)

// StateVersion is the K3ST version Save writes and LoadSession reads. Version 1 is the C
// engine's layout, which has no digests or checksums; version 2 had version 3's layout with a
// digest of the tensor set (names, dtypes, shapes) where version 3 has the model's identity by
// content (§3.6), so a version 2 file cannot say which same-geometry model it came from and is
// refused (StateBadVersion).
const StateVersion = 3

// MaxStatePositions bounds the positions a state file may claim.
const MaxStatePositions = 1 << 24

// K3ST version 3, all integers and floats little-endian (offsets in bytes):
//
//	  0  "K3ST"
//	  4  int32 version = 3
//	  8  int32 fingerprint[12]: hidden, n_layers, vocab, kda_heads, kda_head_dim, conv_k,
//	     mla_heads, qk_nope, qk_rope, v_head, n_experts, topk
//	 56  int32 n_bound (decoder layers), n_mla (MLA layers), cached (positions), nseq (= cached)
//	 72  int64 kper (floats of one KDA layer's state: H·D·D + 3·H·D·(K−1)),
//	     kvpp (floats per position per MLA layer of the first cache part: kv_lora_rank, the
//	     latent form), ropepp (qk_rope_head_dim)
//	 96  end of the C engine's header; version 3 continues:
//	 96  [32]byte config digest, [32]byte model identity (§3.6; version 2: tensor-set digest)
//	160  int32 n_kda (KDA layers), int32 n_logits (vocab, or 0 without last logits),
//	     uint32 flags (bit 0: sampler record present; no other bit may be set), uint32 0
//	176  uint32 CRC-32C of bytes 0..175
//	180  body: int32 seq[nseq]; per KDA layer f32 S, conv_q, conv_k, conv_v (kper floats);
//	     per MLA layer f32 latent [cached·kvpp]; per MLA layer f32 rope key [cached·ropepp];
//	     f32 logits [n_logits]; the sampler record if flagged (Temperature f64, TopK i64,
//	     TopP f64, MinP f64, RepeatPenalty f64, FrequencyPenalty f64, PresencePenalty f64,
//	     PenaltyWindow i64, Seed u64, xoshiro state u64[4]); uint32 CRC-32C of the body
//
// A loader checks, in order: magic, version, header checksum, fingerprint and digests (another
// model), kper/kvpp/ropepp (cache form), counts; then reads the body, growing buffers only as
// data arrives, and checks its checksum before any value is used.
const (
	stateHeaderC    = 96
	stateHeaderSize = 180
	samplerRecord   = 13 * 8
	flagSampler     = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fingerprint identifies what a state file may be restored into: a digest of the configuration
// (every field but the informative eos_token_id) and the model's identity by content (§3.6),
// which tells two checkpoints of one geometry apart and which a coded copy of the model keeps.
type fingerprint struct {
	Config   [32]byte
	Identity checkpoint.Identity
}

// fingerprint returns the model's fingerprint (SHA-256 digests), computed at Open.
func (m *Model) fingerprint() fingerprint {
	return fingerprint{Config: m.cfg.Digest(), Identity: m.integ.Identity}
}

// stateHeader is the decoded fixed header.
type stateHeader struct {
	fp                         [12]int32
	nBound, nMLA, cached, nseq int32
	kper, kvpp, ropepp         int64
	digest                     fingerprint
	nKDA, nLogits              int32
	flags                      uint32
}

func (m *Model) stateHeader() stateHeader {
	c := &m.cfg
	h := stateHeader{
		fp: [12]int32{int32(c.Hidden), int32(c.NumLayers), int32(c.Vocab), int32(c.KDAHeads), int32(c.KDAHeadDim),
			int32(c.ConvK), int32(c.MLAHeads), int32(c.QKNope), int32(c.QKRope), int32(c.VHead), int32(c.NumExperts), int32(c.TopK)},
		nBound: int32(len(m.layers)),
		digest: m.fingerprint(),
	}
	for l := range m.layers {
		if k := m.layers[l].kda; k != nil {
			st := k.NewState()
			h.nKDA++
			h.kper = int64(len(st.S) + len(st.ConvQ) + len(st.ConvK) + len(st.ConvV))
		} else {
			c := m.layers[l].mla.NewCache()
			h.nMLA++
			h.kvpp, h.ropepp = int64(c.KVLoRA), int64(c.Rope)
		}
	}
	return h
}

func (h *stateHeader) encode() []byte {
	b := make([]byte, stateHeaderSize)
	le := binary.LittleEndian
	copy(b, "K3ST")
	le.PutUint32(b[4:], StateVersion)
	for i, v := range h.fp {
		le.PutUint32(b[8+4*i:], uint32(v))
	}
	for i, v := range []int32{h.nBound, h.nMLA, h.cached, h.nseq} {
		le.PutUint32(b[56+4*i:], uint32(v))
	}
	for i, v := range []int64{h.kper, h.kvpp, h.ropepp} {
		le.PutUint64(b[72+8*i:], uint64(v))
	}
	copy(b[96:], h.digest.Config[:])
	copy(b[128:], h.digest.Identity[:])
	le.PutUint32(b[160:], uint32(h.nKDA))
	le.PutUint32(b[164:], uint32(h.nLogits))
	le.PutUint32(b[168:], h.flags)
	le.PutUint32(b[176:], crc32.Checksum(b[:176], castagnoli))
	return b
}

func decodeStateHeader(b []byte) stateHeader {
	le := binary.LittleEndian
	var h stateHeader
	for i := range h.fp {
		h.fp[i] = int32(le.Uint32(b[8+4*i:]))
	}
	h.nBound, h.nMLA = int32(le.Uint32(b[56:])), int32(le.Uint32(b[60:]))
	h.cached, h.nseq = int32(le.Uint32(b[64:])), int32(le.Uint32(b[68:]))
	h.kper, h.kvpp, h.ropepp = int64(le.Uint64(b[72:])), int64(le.Uint64(b[80:])), int64(le.Uint64(b[88:]))
	copy(h.digest.Config[:], b[96:128])
	copy(h.digest.Identity[:], b[128:160])
	h.nKDA, h.nLogits = int32(le.Uint32(b[160:])), int32(le.Uint32(b[164:]))
	h.flags = le.Uint32(b[168:])
	return h
}

// Save writes the session's complete state — processed ids, KDA states and conv tails, MLA
// latent caches, last logits — and, when sm is not nil, the sampler's options and random state,
// as a K3ST version 3 file (layout above). LoadSession restores it into a session of the same
// model that continues bit-identically. A session broken by a failed call cannot be saved.
func (s *Session) Save(w io.Writer, sm *sample.Sampler) error {
	if s.broken != nil {
		return s.broken
	}
	if len(s.ids) != s.pos {
		return fmt.Errorf("k3: save state: the session recorded %d ids for %d positions", len(s.ids), s.pos)
	}
	m := s.m
	h := m.stateHeader()
	h.cached, h.nseq = int32(s.pos), int32(len(s.ids))
	if s.logits != nil {
		h.nLogits = int32(len(s.logits))
	}
	if sm != nil {
		h.flags |= flagSampler
	}
	if _, err := w.Write(h.encode()); err != nil {
		return fmt.Errorf("k3: save state: %w", err)
	}
	sw := &stateWriter{w: w, crc: crc32.New(castagnoli), buf: make([]byte, 0, 64<<10)}
	for _, id := range s.ids {
		sw.u32(uint32(id))
	}
	for _, st := range s.kda {
		if st != nil {
			sw.f32s(st.S)
			sw.f32s(st.ConvQ)
			sw.f32s(st.ConvK)
			sw.f32s(st.ConvV)
		}
	}
	for part := range 2 {
		for _, c := range s.mla {
			if c == nil {
				continue
			}
			for p := range c.Len() {
				if part == 0 {
					sw.f32s(c.Latent(p))
				} else {
					sw.f32s(c.KRope(p))
				}
			}
		}
	}
	sw.f32s(s.logits)
	if sm != nil {
		o, st := sm.Options(), sm.State()
		for _, v := range []uint64{math.Float64bits(o.Temperature), uint64(o.TopK), math.Float64bits(o.TopP),
			math.Float64bits(o.MinP), math.Float64bits(o.RepeatPenalty), math.Float64bits(o.FrequencyPenalty),
			math.Float64bits(o.PresencePenalty), uint64(o.PenaltyWindow), o.Seed,
			st[0], st[1], st[2], st[3]} {
			sw.u64(v)
		}
	}
	sw.flush()
	if sw.err == nil {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], sw.crc.Sum32())
		_, sw.err = w.Write(b[:])
	}
	if sw.err != nil {
		return fmt.Errorf("k3: save state: %w", sw.err)
	}
	return nil
}

// stateWriter buffers little-endian values, checksumming what it writes.
type stateWriter struct {
	w   io.Writer
	crc hash.Hash32
	buf []byte
	err error
}

func (sw *stateWriter) room(n int) {
	if len(sw.buf)+n > cap(sw.buf) {
		sw.flush()
	}
}

func (sw *stateWriter) flush() {
	if sw.err == nil && len(sw.buf) > 0 {
		sw.crc.Write(sw.buf)
		_, sw.err = sw.w.Write(sw.buf)
	}
	sw.buf = sw.buf[:0]
}

func (sw *stateWriter) u32(v uint32) {
	sw.room(4)
	sw.buf = binary.LittleEndian.AppendUint32(sw.buf, v)
}

func (sw *stateWriter) u64(v uint64) {
	sw.room(8)
	sw.buf = binary.LittleEndian.AppendUint64(sw.buf, v)
}

func (sw *stateWriter) f32s(v []float32) {
	for _, x := range v {
		sw.u32(math.Float32bits(x))
	}
}

// LoadSession reads a state file written by Session.Save and returns a new session of m holding
// that state, and the saved sampler (nil when none was saved). Each refusal of the file is a
// *StateError, which matches ErrState; its Reason says what was wrong (StateBadMagic,
// StateBadVersion, StateBadChecksum for a corrupted header or body, StateOtherModel for another
// configuration, tensor set or layer count, StateOtherCacheForm, StateCorrupt for a consistent
// checksum over impossible values, StateTruncated) and its Offset where. An error from r other
// than io.EOF is returned wrapped, and is not a refusal. Memory grows only with the bytes
// actually read. LoadSession reads exactly the file's bytes from r.
func LoadSession(m *Model, r io.Reader) (*Session, *sample.Sampler, error) {
	cr := &countingReader{r: r}
	refuse := func(reason StateReason, off int64, format string, args ...any) error {
		return &StateError{Reason: reason, Offset: off, detail: fmt.Sprintf(format, args...)}
	}
	hb := make([]byte, stateHeaderSize)
	got, err := io.ReadFull(cr, hb[:8])
	if head := hb[:min(got, 4)]; !strings.HasPrefix("K3ST", string(head)) {
		return nil, nil, refuse(StateBadMagic, 0, "starts with %q", head)
	}
	if err != nil {
		return nil, nil, cr.readErr(err)
	}
	switch v := int32(binary.LittleEndian.Uint32(hb[4:])); {
	case v == 1:
		return nil, nil, refuse(StateBadVersion, 4, "version 1 (the C engine's layout, without digests or checksums); this engine reads version %d", StateVersion)
	case v == 2:
		return nil, nil, refuse(StateBadVersion, 4, "version 2 (the model named by its tensor set, not its content, so a same-geometry sibling's state cannot be told apart); this engine reads version %d", StateVersion)
	case v > StateVersion:
		return nil, nil, refuse(StateBadVersion, 4, "version %d is newer than %d", v, StateVersion)
	case v != StateVersion:
		return nil, nil, refuse(StateBadVersion, 4, "version %d", v)
	}
	if err := cr.readFull(hb[8:]); err != nil {
		return nil, nil, err
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(hb[176:]), crc32.Checksum(hb[:176], castagnoli); got != want {
		return nil, nil, refuse(StateBadChecksum, 176, "header CRC-32C %08x, computed %08x", got, want)
	}
	h := decodeStateHeader(hb)
	want := m.stateHeader()
	switch {
	case h.fp != want.fp:
		return nil, nil, refuse(StateOtherModel, 8, "fingerprint %v, model %v", h.fp, want.fp)
	case h.nBound != want.nBound || h.nMLA != want.nMLA || h.nKDA != want.nKDA:
		off := int64(56)
		switch {
		case h.nBound != want.nBound:
		case h.nMLA != want.nMLA:
			off = 60
		default:
			off = 160
		}
		return nil, nil, refuse(StateOtherModel, off, "%d layers (%d MLA, %d KDA), model %d (%d, %d)",
			h.nBound, h.nMLA, h.nKDA, want.nBound, want.nMLA, want.nKDA)
	case h.digest.Config != want.digest.Config:
		return nil, nil, refuse(StateOtherModel, 96, "configuration digest differs")
	case h.digest.Identity != want.digest.Identity:
		return nil, nil, refuse(StateOtherModel, 128, "saved from model %v, this model is %v (§3.6)", checkpoint.Identity(h.digest.Identity), want.digest.Identity)
	case h.kper != want.kper || h.kvpp != want.kvpp || h.ropepp != want.ropepp:
		off := int64(72)
		switch {
		case h.kper != want.kper:
		case h.kvpp != want.kvpp:
			off = 80
		default:
			off = 88
		}
		return nil, nil, refuse(StateOtherCacheForm, off, "kper %d kvpp %d ropepp %d, this engine runs kper %d kvpp %d ropepp %d (latent MLA cache)",
			h.kper, h.kvpp, h.ropepp, want.kper, want.kvpp, want.ropepp)
	case h.cached < 0 || h.cached > MaxStatePositions:
		return nil, nil, refuse(StateCorrupt, 64, "%d positions (at most %d)", h.cached, MaxStatePositions)
	case h.nseq != h.cached:
		return nil, nil, refuse(StateCorrupt, 68, "%d ids for %d positions", h.nseq, h.cached)
	case h.nLogits != 0 && h.nLogits != int32(m.cfg.Vocab):
		return nil, nil, refuse(StateCorrupt, 164, "%d logits, vocab %d", h.nLogits, m.cfg.Vocab)
	case h.flags&^flagSampler != 0:
		return nil, nil, refuse(StateCorrupt, 168, "unknown flags %#x", h.flags)
	case le.Uint32(hb[172:]) != 0:
		return nil, nil, refuse(StateCorrupt, 172, "reserved word %#x is not zero", le.Uint32(hb[172:]))
	}

	sr := &stateReader{r: cr, crc: crc32.New(castagnoli), buf: make([]byte, 64<<10)}
	n := int(h.cached)
	ids := sr.u32s(n)
	s := m.NewSession()
	for _, st := range s.kda {
		if st != nil {
			sr.into(st.S)
			sr.into(st.ConvQ)
			sr.into(st.ConvK)
			sr.into(st.ConvV)
		}
	}
	kvpp, ropepp := int(h.kvpp), int(h.ropepp)
	var lat [][]float32
	for _, c := range s.mla {
		if c != nil {
			lat = append(lat, sr.f32s(n*kvpp))
		}
	}
	j := 0
	for _, c := range s.mla {
		if c == nil {
			continue
		}
		rope := sr.f32s(n * ropepp)
		if sr.err != nil {
			break
		}
		// Both parts are in memory now, so this allocation is bounded by bytes read.
		c.KV = make([]float32, 0, n*(kvpp+ropepp))
		for p := range n {
			c.KV = append(c.KV, lat[j][p*kvpp:(p+1)*kvpp]...)
			c.KV = append(c.KV, rope[p*ropepp:(p+1)*ropepp]...)
		}
		lat[j] = nil
		j++
	}
	var logits []float32
	if h.nLogits > 0 {
		logits = sr.f32s(int(h.nLogits))
	}
	recAt := cr.n
	var rec []uint64
	if h.flags&flagSampler != 0 {
		rec = sr.u64s(samplerRecord / 8)
	}
	if sr.err != nil {
		return nil, nil, sr.err
	}
	sum, sumAt := sr.crc.Sum32(), cr.n
	var tail [4]byte
	if err := cr.readFull(tail[:]); err != nil {
		return nil, nil, err
	}
	if got := le.Uint32(tail[:]); got != sum {
		return nil, nil, refuse(StateBadChecksum, sumAt, "body CRC-32C %08x, computed %08x", got, sum)
	}

	// The bytes are what was written; now check that the values are possible.
	s.ids = make([]int, n)
	for i, id := range ids {
		if id >= uint32(m.cfg.Vocab) {
			return nil, nil, refuse(StateCorrupt, stateHeaderSize+4*int64(i), "id %d at position %d is outside [0, %d)", id, i, m.cfg.Vocab)
		}
		s.ids[i] = int(id)
	}
	s.pos, s.logits = n, logits
	var sm *sample.Sampler
	if rec != nil {
		f := math.Float64frombits
		o := sample.Options{Temperature: f(rec[0]), TopK: int(int64(rec[1])), TopP: f(rec[2]), MinP: f(rec[3]),
			RepeatPenalty: f(rec[4]), FrequencyPenalty: f(rec[5]), PresencePenalty: f(rec[6]),
			PenaltyWindow: int(int64(rec[7])), Seed: rec[8]}
		var err error
		if sm, err = sample.Resume(o, [4]uint64(rec[9:13])); err != nil {
			return nil, nil, refuse(StateCorrupt, recAt, "sampler record: %v", err)
		}
	}
	return s, sm, nil
}

// countingReader counts the bytes read, so a refusal can say where in the file it is.
type countingReader struct {
	r io.Reader
	n int64
}

func (cr *countingReader) Read(b []byte) (int, error) {
	n, err := cr.r.Read(b)
	cr.n += int64(n)
	return n, err
}

// readFull fills b, refusing a file that ends first as truncated.
func (cr *countingReader) readFull(b []byte) error {
	if _, err := io.ReadFull(cr, b); err != nil {
		return cr.readErr(err)
	}
	return nil
}

func (cr *countingReader) readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &StateError{Reason: StateTruncated, Offset: cr.n}
	}
	return fmt.Errorf("k3: load state at byte %d: %w", cr.n, err)
}

// stateReader reads little-endian values in chunks, checksumming them; the first error sticks.
type stateReader struct {
	r   *countingReader
	crc hash.Hash32
	buf []byte
	err error
}

// chunks reads n bytes in buffer-sized pieces, handing each to f.
func (sr *stateReader) chunks(n int, f func([]byte)) {
	for n > 0 && sr.err == nil {
		b := sr.buf[:min(n, len(sr.buf))]
		if sr.err = sr.r.readFull(b); sr.err != nil {
			return
		}
		sr.crc.Write(b)
		f(b)
		n -= len(b)
	}
}

func (sr *stateReader) into(dst []float32) {
	i := 0
	sr.chunks(4*len(dst), func(b []byte) {
		for k := 0; k < len(b); k += 4 {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[k:]))
			i++
		}
	})
}

func (sr *stateReader) f32s(n int) []float32 {
	var out []float32
	sr.chunks(4*n, func(b []byte) {
		for k := 0; k < len(b); k += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(b[k:])))
		}
	})
	return out
}

func (sr *stateReader) u32s(n int) []uint32 {
	var out []uint32
	sr.chunks(4*n, func(b []byte) {
		for k := 0; k < len(b); k += 4 {
			out = append(out, binary.LittleEndian.Uint32(b[k:]))
		}
	})
	return out
}

func (sr *stateReader) u64s(n int) []uint64 {
	var out []uint64
	sr.chunks(8*n, func(b []byte) {
		for k := 0; k < len(b); k += 8 {
			out = append(out, binary.LittleEndian.Uint64(b[k:]))
		}
	})
	return out
}
