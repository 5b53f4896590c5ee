package safetensors

import (
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// scanner is a strict, allocation-light JSON tokenizer for the fixed shapes
// of safetensors headers and index files. encoding/json is too slow for the
// ~78 MB of K3 headers and too lenient (it maps lone surrogates to U+FFFD and
// keeps the last of duplicate keys), so the grammar is checked by hand.
//
// The input must already be valid UTF-8; strings without escapes are
// returned as substrings of s, which aliases b. b must therefore never be
// modified after the scanner is created.
type scanner struct {
	b    []byte
	s    string // same bytes as b
	i    int
	file string
	err  *Error
	tmp  []byte // reused for escaped strings

	// Where the last string returned by str came from: its content starts
	// at lastStart in b unless it had escapes (then it is a fresh copy).
	lastStart   int
	lastEscaped bool
}

func newScanner(file string, b []byte) *scanner {
	var s string
	if len(b) > 0 {
		s = unsafe.String(&b[0], len(b))
	}
	return &scanner{b: b, s: s, file: file}
}

// fail records the first error; later failures are ignored so the earliest
// cause is reported.
func (sc *scanner) fail(tensor string, sentinel error, detail string) {
	if sc.err == nil {
		sc.err = newErr(sc.file, tensor, int64(sc.i), sentinel, detail)
	}
}

func (sc *scanner) ws() {
	// Every JSON white-space byte is <= ' ', so one comparison settles the
	// usual case of a token byte.
	for sc.i < len(sc.b) && sc.b[sc.i] <= ' ' {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// peek returns the next byte or 0 at the end.
func (sc *scanner) peek() byte {
	if sc.i < len(sc.b) {
		return sc.b[sc.i]
	}
	return 0
}

// expect consumes c after optional white space.
func (sc *scanner) expect(c byte, tensor string) bool {
	sc.ws()
	if sc.peek() != c {
		sc.fail(tensor, ErrSyntax, "expected "+strconv.QuoteRune(rune(c))+", found "+sc.found())
		return false
	}
	sc.i++
	return true
}

func (sc *scanner) found() string {
	if sc.i >= len(sc.b) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(sc.b[sc.i]))
}

// str parses a JSON string starting at the opening quote.
func (sc *scanner) str(tensor string) (string, bool) {
	if sc.peek() != '"' {
		sc.fail(tensor, ErrSyntax, "expected a string, found "+sc.found())
		return "", false
	}
	sc.i++
	start := sc.i
	sc.lastStart, sc.lastEscaped = start, false
	b := sc.b
	i := start
	// Eight bytes at a time: stop at the first word holding '"', '\\' or a
	// control character, then finish byte by byte.
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if hasSpecial(w) {
			break
		}
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			sc.i = i + 1
			return sc.s[start:i], true
		}
		if c == '\\' {
			sc.i = i
			return sc.strSlow(start, tensor)
		}
		if c < 0x20 {
			sc.i = i
			sc.fail(tensor, ErrSyntax, "control character in string")
			return "", false
		}
		if c >= utf8.RuneSelf {
			// Strings are the only place non-ASCII bytes may appear, so
			// validating them here validates the whole document.
			n := validRune(b[i:])
			if n == 0 {
				sc.i = i
				sc.fail(tensor, ErrInvalidUTF8, "")
				return "", false
			}
			i += n - 1
		}
	}
	sc.i = len(b)
	sc.fail(tensor, ErrSyntax, "unterminated string")
	return "", false
}

// strSlow decodes a string that contains escapes; sc.i is at the first
// backslash and start is the first content byte.
func (sc *scanner) strSlow(start int, tensor string) (string, bool) {
	sc.lastEscaped = true
	out := append(sc.tmp[:0], sc.b[start:sc.i]...)
	b := sc.b
	for sc.i < len(b) {
		c := b[sc.i]
		switch {
		case c == '"':
			sc.i++
			sc.tmp = out
			return string(out), true
		case c < 0x20:
			sc.fail(tensor, ErrSyntax, "control character in string")
			return "", false
		case c >= utf8.RuneSelf:
			n := validRune(b[sc.i:])
			if n == 0 {
				sc.fail(tensor, ErrInvalidUTF8, "")
				return "", false
			}
			out = append(out, b[sc.i:sc.i+n]...)
			sc.i += n
			continue
		case c != '\\':
			out = append(out, c)
			sc.i++
			continue
		}
		if sc.i+1 >= len(b) {
			sc.fail(tensor, ErrInvalidEscape, "backslash at end of input")
			return "", false
		}
		e := b[sc.i+1]
		sc.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := sc.hex4(tensor)
			if !ok {
				return "", false
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00:
				// A high surrogate must be followed by an escaped low one.
				if sc.i+1 >= len(b) || b[sc.i] != '\\' || b[sc.i+1] != 'u' {
					sc.fail(tensor, ErrLoneSurrogate, "high surrogate "+hexRune(r)+" not followed by \\u low surrogate")
					return "", false
				}
				sc.i += 2
				r2, ok := sc.hex4(tensor)
				if !ok {
					return "", false
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					sc.fail(tensor, ErrLoneSurrogate, "high surrogate "+hexRune(r)+" followed by "+hexRune(r2))
					return "", false
				}
				out = utf8.AppendRune(out, utf16.DecodeRune(r, r2))
			case utf16.IsSurrogate(r):
				sc.fail(tensor, ErrLoneSurrogate, "low surrogate "+hexRune(r)+" without a high one")
				return "", false
			default:
				out = utf8.AppendRune(out, r)
			}
		default:
			sc.i -= 2
			sc.fail(tensor, ErrInvalidEscape, "\\"+string(rune(e)))
			return "", false
		}
	}
	sc.fail(tensor, ErrSyntax, "unterminated string")
	return "", false
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// hasSpecial reports whether a word may contain '"', '\\' or a byte below
// 0x20. It may report true spuriously for bytes >= 0x80 (non-ASCII), which
// only sends the caller to the exact byte loop.
func hasSpecial(w uint64) bool {
	q := w ^ (lo8 * '"')
	bs := w ^ (lo8 * '\\')
	return ((q-lo8)|(bs-lo8)|(w-lo8*0x20))&hi8 != 0
}

func hexRune(r rune) string { return "\\u" + strconv.FormatInt(int64(r)+0x10000, 16)[1:] }

func (sc *scanner) hex4(tensor string) (rune, bool) {
	if sc.i+4 > len(sc.b) {
		sc.fail(tensor, ErrInvalidEscape, "truncated \\u escape")
		return 0, false
	}
	var r rune
	for k := 0; k < 4; k++ {
		c := sc.b[sc.i+k]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			sc.i += k
			sc.fail(tensor, ErrInvalidEscape, "non-hex digit in \\u escape")
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	sc.i += 4
	return r, true
}

// uint parses a non-negative JSON integer. badType is the sentinel used when
// the value is not a number at all.
func (sc *scanner) uint(tensor string, badType error) (int64, bool) {
	sc.ws()
	b := sc.b
	i := sc.i
	if i >= len(b) {
		sc.fail(tensor, ErrSyntax, "unexpected end of input")
		return 0, false
	}
	if b[i] == '-' {
		sc.fail(tensor, ErrBadInteger, "negative number")
		return 0, false
	}
	if b[i] < '0' || b[i] > '9' {
		sc.fail(tensor, badType, "expected an integer, found "+sc.found())
		return 0, false
	}
	start := i
	// One pass: a value of more than 19 digits may wrap u, but it is
	// refused below by its length alone.
	var u uint64
	for i < len(b) {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
		i++
	}
	n := i - start
	if b[start] == '0' && n > 1 {
		sc.i = start
		sc.fail(tensor, ErrBadInteger, "leading zero")
		return 0, false
	}
	// Up to 19 digits fit in a uint64 without wrapping, so overflow is one
	// comparison at the end instead of a check per digit.
	if n > 19 {
		sc.i = start
		sc.fail(tensor, ErrIntegerOverflow, "integer does not fit in int64")
		return 0, false
	}
	if u > maxInt64 {
		sc.i = start
		sc.fail(tensor, ErrIntegerOverflow, "integer does not fit in int64")
		return 0, false
	}
	v := int64(u)
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		sc.i = i
		sc.fail(tensor, ErrBadInteger, "fractional or exponent number")
		return 0, false
	}
	sc.i = i
	return v, true
}

// skipValue skips any strict-JSON value, including nested duplicates
// checks; it is used for index fields the reader does not interpret.
func (sc *scanner) skipValue(depth int) bool {
	if depth > 64 {
		sc.fail("", ErrSyntax, "nesting deeper than 64")
		return false
	}
	sc.ws()
	switch c := sc.peek(); {
	case c == '"':
		_, ok := sc.str("")
		return ok
	case c == '{':
		sc.i++
		sc.ws()
		if sc.peek() == '}' {
			sc.i++
			return true
		}
		seen := map[string]struct{}{}
		for {
			sc.ws()
			k, ok := sc.str("")
			if !ok {
				return false
			}
			if _, dup := seen[k]; dup {
				sc.fail("", ErrDuplicateKey, strconv.Quote(k))
				return false
			}
			seen[k] = struct{}{}
			if !sc.expect(':', "") || !sc.skipValue(depth+1) {
				return false
			}
			more, ok := sc.next("")
			if !ok {
				return false
			}
			if !more {
				return true
			}
		}
	case c == '[':
		sc.i++
		sc.ws()
		if sc.peek() == ']' {
			sc.i++
			return true
		}
		for {
			if !sc.skipValue(depth + 1) {
				return false
			}
			sc.ws()
			switch sc.peek() {
			case ',':
				sc.i++
			case ']':
				sc.i++
				return true
			default:
				sc.fail("", ErrSyntax, "expected ',' or ']', found "+sc.found())
				return false
			}
		}
	case c == 't':
		return sc.literal("true")
	case c == 'f':
		return sc.literal("false")
	case c == 'n':
		return sc.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return sc.number()
	}
	sc.fail("", ErrSyntax, "expected a value, found "+sc.found())
	return false
}

func (sc *scanner) literal(w string) bool {
	if len(sc.s)-sc.i >= len(w) && sc.s[sc.i:sc.i+len(w)] == w {
		sc.i += len(w)
		return true
	}
	sc.fail("", ErrSyntax, "invalid literal")
	return false
}

// number checks the RFC 8259 number grammar (which excludes NaN, Infinity,
// leading '+', leading zeros and bare '.').
func (sc *scanner) number() bool {
	b := sc.b
	i := sc.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - s
	}
	s := i
	n := digits()
	if n == 0 || (b[s] == '0' && n > 1) {
		sc.fail("", ErrSyntax, "malformed number")
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			sc.fail("", ErrSyntax, "malformed number")
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			sc.fail("", ErrSyntax, "malformed number")
			return false
		}
	}
	sc.i = i
	return true
}

// next consumes ',' (more=true) or the closing '}' (more=false) of an
// object and refuses a trailing comma.
func (sc *scanner) next(tensor string) (more, ok bool) {
	sc.ws()
	switch sc.peek() {
	case ',':
		sc.i++
		sc.ws()
		if sc.peek() != '"' {
			sc.fail(tensor, ErrSyntax, "expected a key after ',', found "+sc.found())
			return false, false
		}
		return true, true
	case '}':
		sc.i++
		return false, true
	}
	sc.fail(tensor, ErrSyntax, "expected ',' or '}', found "+sc.found())
	return false, false
}

// end checks that only JSON white space (space, TAB, LF, CR) follows the
// top-level object. §7.3 names spaces, the padding writers emit; the
// reference reader has accepted every JSON white-space byte there since
// 2026 and its test suite requires it, so this reader does too.
func (sc *scanner) end() bool {
	for j := sc.i; j < len(sc.b); j++ {
		if c := sc.b[j]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			sc.i = j
			sc.fail("", ErrTrailingGarbage, "found "+sc.found())
			return false
		}
	}
	return true
}

// open consumes the top-level '{'; leading JSON white space is allowed.
func (sc *scanner) open() bool {
	sc.ws()
	if sc.peek() != '{' {
		sc.fail("", ErrNotObject, "first non-space byte is "+sc.found())
		return false
	}
	sc.i++
	return true
}

// validRune returns the length of the valid UTF-8 sequence at the start of
// b, or 0 if it is invalid (including surrogates and overlong forms).
func validRune(b []byte) int {
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 {
		return 0
	}
	return n
}
