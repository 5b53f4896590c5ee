package strictjson

import (
	"strings"
	"unicode/utf8"
)

// strErr describes a string-decoding failure at an offset relative to the
// slice given to decodeString.
type strErr struct {
	off int
	msg string
	err error
}

// decodeString decodes the JSON string literal that starts with the quote at
// s[0]. It returns the decoded text and the index just past the closing quote.
func decodeString(s []byte) (string, int, *strErr) {
	text, n, plain, e := scanString(s)
	if e == nil && plain {
		text = string(s[1 : n-1])
	}
	return text, n, e
}

// scanString validates and decodes the string literal at s[0]. For a literal
// without escapes (plain) it returns no text: the text is s[1:n-1], which a
// caller holding the input as a string can slice without copying.
func scanString(s []byte) (text string, n int, plain bool, e *strErr) {
	if len(s) == 0 || s[0] != '"' {
		return "", 0, false, &strErr{0, "expected '\"'", ErrSyntax}
	}
	i := 1
	for i < len(s) {
		c := s[i]
		if c == '"' {
			return "", i + 1, true, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", 0, false, &strErr{i, "control character in string (must be escaped)", ErrSyntax}
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return "", 0, false, &strErr{i, "invalid UTF-8 in string", ErrInvalidUTF8}
		}
		i += n
	}
	if i >= len(s) {
		return "", 0, false, &strErr{len(s), "unterminated string", ErrSyntax}
	}
	// Slow path from the first escape on.
	var b strings.Builder
	b.Grow(i + 16)
	b.Write(s[1:i])
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, false, nil
		case c == '\\':
			n, e := decodeEscape(s, i, &b)
			if e != nil {
				return "", 0, false, e
			}
			i += n
		case c < 0x20:
			return "", 0, false, &strErr{i, "control character in string (must be escaped)", ErrSyntax}
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n <= 1 {
				return "", 0, false, &strErr{i, "invalid UTF-8 in string", ErrInvalidUTF8}
			}
			b.Write(s[i : i+n])
			i += n
		}
	}
	return "", 0, false, &strErr{len(s), "unterminated string", ErrSyntax}
}

// decodeEscape decodes the escape sequence at s[i] (a backslash) into b and
// returns its length in bytes.
func decodeEscape(s []byte, i int, b *strings.Builder) (int, *strErr) {
	if i+1 >= len(s) {
		return 0, &strErr{len(s), "unterminated string", ErrSyntax}
	}
	switch s[i+1] {
	case '"':
		b.WriteByte('"')
	case '\\':
		b.WriteByte('\\')
	case '/':
		b.WriteByte('/')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		r, ok := hex4(s, i+2)
		if !ok {
			return 0, &strErr{i, "malformed \\u escape (need four hex digits)", ErrSyntax}
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, &strErr{i, "low surrogate escape without a preceding high surrogate", ErrLoneSurrogate}
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 >= len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return 0, &strErr{i, "high surrogate escape not followed by a \\u low surrogate", ErrLoneSurrogate}
			}
			lo, ok := hex4(s, i+8)
			if !ok {
				return 0, &strErr{i + 6, "malformed \\u escape (need four hex digits)", ErrSyntax}
			}
			if lo < 0xDC00 || lo > 0xDFFF {
				return 0, &strErr{i, "high surrogate escape not followed by a low surrogate", ErrLoneSurrogate}
			}
			b.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
			return 12, nil
		}
		b.WriteRune(r)
		return 6, nil
	default:
		return 0, &strErr{i, "invalid escape \\" + escShow(s[i+1]), ErrSyntax}
	}
	return 2, nil
}

func escShow(c byte) string {
	if c >= 0x21 && c < 0x7f {
		return string(rune(c))
	}
	return "\\x" + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Unquote decodes one complete JSON string literal, quotes included, with the
// same rules as the parser: valid UTF-8, no raw control characters, exact
// escapes, surrogate pairs combined and lone surrogates refused. Whitespace
// or anything else around the literal is an error.
func Unquote(quoted []byte) (string, error) {
	s, n, e := decodeString(quoted)
	if e != nil {
		return "", &Error{Offset: int64(e.off), Msg: e.msg, Err: e.err}
	}
	if n != len(quoted) {
		return "", &Error{Offset: int64(n), Msg: "data after the closing quote", Err: ErrSyntax}
	}
	return s, nil
}

// AppendQuote appends s as a JSON string literal to dst. It escapes '"',
// '\\' and control characters (as \n, \t, … or \u00XX) and keeps every other
// character as UTF-8, so Unquote returns s for any valid UTF-8 input. Invalid
// UTF-8 bytes, which JSON cannot carry, are written as \ufffd.
func AppendQuote(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}
