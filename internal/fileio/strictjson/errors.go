package strictjson

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors wrapped by every [*Error]; test with errors.Is.
var (
	// ErrSyntax: the input is not RFC 8259 JSON (or a literal is malformed).
	ErrSyntax = errors.New("syntax error")
	// ErrDuplicateKey: an object holds the same key twice.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrInvalidUTF8: a string holds bytes that are not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLoneSurrogate: a \uXXXX escape is half of a surrogate pair without its other half.
	ErrLoneSurrogate = errors.New("lone surrogate escape")
	// ErrTooDeep: arrays and objects nest deeper than Limits.MaxDepth.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrTooLarge: the input is longer than Limits.MaxBytes.
	ErrTooLarge = errors.New("input too large")
	// ErrType: a value was read as a kind it is not (e.g. Int64 of a string).
	ErrType = errors.New("wrong type")
	// ErrNotInteger: a number has a non-zero fractional part where an integer is required.
	ErrNotInteger = errors.New("not an integer")
	// ErrRange: a number does not fit the requested Go type (int64 overflow, float64 infinity).
	ErrRange = errors.New("out of range")
)

// Error is a parse or conversion error at a byte offset of the input.
type Error struct {
	// Offset is the zero-based byte offset in the input where the problem was found.
	Offset int64
	// Path locates the enclosing value, e.g. `text_config.full_attn_layers[2]`;
	// empty for the top-level value or when unknown (conversion errors).
	Path string
	// Msg describes the problem.
	Msg string
	// Err is one of the package's sentinel errors.
	Err error
}

// Error formats the offset, the path when known, and the message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("strictjson: byte ")
	b.WriteString(strconv.FormatInt(e.Offset, 10))
	if e.Path != "" {
		b.WriteString(" (at ")
		b.WriteString(e.Path)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// pathSeg is one step of the path to the value being parsed; it is only
// rendered to text when an error is reported.
type pathSeg struct {
	key   string
	index int
	isKey bool
}

func formatPath(segs []pathSeg) string {
	var b strings.Builder
	for _, s := range segs {
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if isPlainKey(s.key) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
			continue
		}
		b.WriteByte('[')
		b.Write(AppendQuote(nil, s.key))
		b.WriteByte(']')
	}
	return b.String()
}

// isPlainKey reports whether a key can be shown as a bare dotted path step
// without ambiguity.
func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
