package tokenizer

import (
	"unicode/utf8"
)

// DecodeBytes concatenates the bytes of ids (specials give their names). An
// id that is neither a rank nor a special is an *UnknownIDError; nothing is
// skipped.
func (e *Encoding) DecodeBytes(ids []int) ([]byte, error) {
	return e.AppendDecodedBytes(nil, ids)
}

// AppendDecodedBytes appends the bytes of ids to dst (see DecodeBytes).
func (e *Encoding) AppendDecodedBytes(dst []byte, ids []int) ([]byte, error) {
	for i, id := range ids {
		b, ok := e.tokenBytes(id)
		if !ok {
			return nil, &UnknownIDError{ID: id, Index: i}
		}
		dst = append(dst, b...)
	}
	return dst, nil
}

// Decode decodes ids to a string, replacing ill-formed UTF-8 like Python's
// bytes.decode("utf-8", errors="replace"): one U+FFFD per maximal ill-formed
// subpart (see ReplaceInvalidUTF8).
func (e *Encoding) Decode(ids []int) (string, error) {
	b, err := e.DecodeBytes(ids)
	if err != nil {
		return "", err
	}
	return ReplaceInvalidUTF8(b), nil
}

// ReplaceInvalidUTF8 converts b to a string, substituting U+FFFD once for
// each maximal subpart of an ill-formed sequence (Unicode §3.9, "U+FFFD
// substitution of maximal subparts"; Python's errors="replace"). A truncated
// but otherwise valid prefix of a multi-byte sequence is one subpart; a byte
// that cannot start or continue a sequence is one subpart on its own. Go's
// utf8.DecodeRune reports one error per byte and is not used for this.
func ReplaceInvalidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		n, ok := seqLen(b[i:])
		if ok {
			out = append(out, b[i:i+n]...)
		} else {
			out = append(out, "\uFFFD"...)
		}
		i += n
	}
	return string(out)
}

// seqLen examines the sequence starting at b[0] (≥ 0x80). It returns the
// length of a well-formed sequence and true, or the length of the maximal
// ill-formed subpart (at least 1) and false.
func seqLen(b []byte) (int, bool) {
	need, lo, hi := leadInfo(b[0])
	if need == 0 {
		return 1, false
	}
	for k := 1; k <= need; k++ {
		if k >= len(b) {
			return k, false
		}
		c := b[k]
		l, h := byte(0x80), byte(0xBF)
		if k == 1 {
			l, h = lo, hi
		}
		if c < l || c > h {
			return k, false
		}
	}
	return need + 1, true
}

// leadInfo returns how many continuation bytes lead byte c needs and the
// allowed range of the first one (Unicode Table 3-7); need = 0 means c
// cannot start a sequence.
func leadInfo(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return 0, 0, 0
}

// incompleteTail returns how many trailing bytes of b form a proper prefix
// of a well-formed sequence (0..3): the bytes a stream must hold back.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c >= 0x80 && c <= 0xBF {
			continue // a continuation byte: look further back for the lead
		}
		need, _, _ := leadInfo(c)
		if need < k {
			return 0 // ASCII, invalid, or a complete sequence
		}
		if n, ok := seqLen(b[len(b)-k:]); !ok && n == k {
			return k // every byte so far fits; more are needed
		}
		return 0
	}
	return 0
}

// StreamDecoder turns ids into text incrementally. Push returns only
// complete text; an incomplete trailing UTF-8 sequence (at most 3 bytes) is
// held until later ids complete or break it, or until Flush. The
// concatenation of everything returned equals Decode of all ids.
type StreamDecoder struct {
	enc     *Encoding
	pending []byte
}

// NewStreamDecoder returns a decoder for ids of e.
func (e *Encoding) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{enc: e} }

// Push adds one id and returns the text it completes. An unknown id is an
// *UnknownIDError and leaves the decoder unchanged.
func (d *StreamDecoder) Push(id int) (string, error) {
	b, ok := d.enc.tokenBytes(id)
	if !ok {
		return "", &UnknownIDError{ID: id}
	}
	d.pending = append(d.pending, b...)
	// Cutting just before a lead byte never splits a sequence, so decoding
	// the head now and the rest later matches decoding everything at once.
	keep := incompleteTail(d.pending)
	head := d.pending[:len(d.pending)-keep]
	s := ReplaceInvalidUTF8(head)
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return s, nil
}

// Pending returns the number of bytes held back (0..3).
func (d *StreamDecoder) Pending() int { return len(d.pending) }

// Flush returns the held-back bytes with replacements and resets the
// decoder.
func (d *StreamDecoder) Flush() string {
	s := ReplaceInvalidUTF8(d.pending)
	d.pending = d.pending[:0]
	return s
}
