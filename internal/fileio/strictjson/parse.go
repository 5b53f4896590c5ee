package strictjson

import (
	"fmt"
	"io"
)

// Default limits used when a Limits field is zero or negative.
const (
	// DefaultMaxBytes is 256 MiB, the bound §2.4 sets for config.json.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxDepth bounds array/object nesting; real files nest a few levels.
	DefaultMaxDepth = 512
)

// Limits bounds the resources a parse may use. A field ≤ 0 takes its default.
type Limits struct {
	MaxBytes int64
	MaxDepth int
}

func (l Limits) norm() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// indexThreshold is the object size from which duplicate detection and Get
// use a map instead of a linear scan.
const indexThreshold = 12

// Parse parses data with the default limits.
func Parse(data []byte) (*Value, error) {
	return ParseLimits(data, Limits{})
}

// ParseLimits parses data, which must hold exactly one JSON value surrounded
// by optional whitespace. The tree keeps one string copy of data alive:
// numbers and escape-free strings are substrings of it. data itself is not
// retained and may be reused by the caller.
func ParseLimits(data []byte, lim Limits) (*Value, error) {
	lim = lim.norm()
	if int64(len(data)) > lim.MaxBytes {
		return nil, &Error{Offset: lim.MaxBytes, Msg: fmt.Sprintf("input is %d bytes, limit %d", len(data), lim.MaxBytes), Err: ErrTooLarge}
	}
	// One copy of the input as a string lets every number and escape-free
	// string share it instead of allocating its own.
	p := parser{data: data, src: string(data), maxDepth: lim.MaxDepth}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		return nil, p.fail(0, "byte-order mark before the JSON text", ErrSyntax)
	}
	p.skipSpace()
	if p.pos >= len(data) {
		return nil, p.fail(p.pos, "empty input", ErrSyntax)
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(data) {
		return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s after the top-level value", show(data[p.pos])), ErrSyntax)
	}
	return v, nil
}

// ParseReader reads r to its end, refusing more than lim.MaxBytes bytes
// without reading further, and parses the result.
func ParseReader(r io.Reader, lim Limits) (*Value, error) {
	lim = lim.norm()
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("strictjson: read: %w", err)
	}
	if int64(len(data)) > lim.MaxBytes {
		return nil, &Error{Offset: lim.MaxBytes, Msg: fmt.Sprintf("input exceeds the limit of %d bytes", lim.MaxBytes), Err: ErrTooLarge}
	}
	return ParseLimits(data, lim)
}

type parser struct {
	data     []byte
	src      string
	slab     []Value
	pos      int
	depth    int
	maxDepth int
	path     []pathSeg
}

// node allocates Values in blocks: one allocation per value dominated the
// parse time of large headers.
func (p *parser) node() *Value {
	if len(p.slab) == 0 {
		p.slab = make([]Value, 256)
	}
	v := &p.slab[0]
	p.slab = p.slab[1:]
	return v
}

// str returns the text of the string literal at p.pos and advances past it.
func (p *parser) str() (string, error) {
	start := p.pos
	text, n, plain, e := scanString(p.data[start:])
	if e != nil {
		return "", p.fail(start+e.off, e.msg, e.err)
	}
	p.pos += n
	if plain {
		text = p.src[start+1 : start+n-1]
	}
	return text, nil
}

func (p *parser) fail(off int, msg string, sentinel error) *Error {
	return &Error{Offset: int64(off), Path: formatPath(p.path), Msg: msg, Err: sentinel}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func show(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// value parses the value at p.pos (whitespace already skipped).
func (p *parser) value() (*Value, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail(p.pos, "unexpected end of input, expected a value", ErrSyntax)
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		v := p.node()
		*v = Value{kind: String, off: int64(start), text: s}
		return v, nil
	case c == '-' || isDigit(c):
		n, msg := scanNumber(p.data[p.pos:])
		if n == 0 {
			return nil, p.fail(start, msg, ErrSyntax)
		}
		p.pos += n
		v := p.node()
		*v = Value{kind: Number, off: int64(start), text: p.src[start:p.pos]}
		return v, nil
	case c == 't':
		return p.literal("true", Value{kind: Bool, off: int64(start), b: true})
	case c == 'f':
		return p.literal("false", Value{kind: Bool, off: int64(start)})
	case c == 'n':
		return p.literal("null", Value{kind: Null, off: int64(start)})
	default:
		return nil, p.fail(start, fmt.Sprintf("unexpected %s, expected a value", show(c)), ErrSyntax)
	}
}

func (p *parser) literal(word string, lit Value) (*Value, error) {
	end := p.pos + len(word)
	if end > len(p.data) || p.src[p.pos:end] != word {
		return nil, p.fail(p.pos, "invalid literal (only true, false and null are allowed)", ErrSyntax)
	}
	p.pos = end
	v := p.node()
	*v = lit
	return v, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.fail(p.pos, fmt.Sprintf("more than %d nested arrays/objects", p.maxDepth), ErrTooDeep)
	}
	return nil
}

func (p *parser) array() (*Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	v := p.node()
	*v = Value{kind: Array, off: int64(p.pos)}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		v.items = []*Value{}
		return v, nil
	}
	for {
		p.path = append(p.path, pathSeg{index: len(v.items)})
		p.skipSpace()
		item, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		v.items = append(v.items, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(p.pos, "unexpected end of input inside an array", ErrSyntax)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			if p.pos < len(p.data) && p.data[p.pos] == ']' {
				return nil, p.fail(p.pos, "trailing comma before ']'", ErrSyntax)
			}
		case ']':
			p.pos++
			p.depth--
			return v, nil
		default:
			return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in array, expected ',' or ']'", show(p.data[p.pos])), ErrSyntax)
		}
	}
}

func (p *parser) object() (*Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	v := p.node()
	*v = Value{kind: Object, off: int64(p.pos)}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		v.members = []Member{}
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(p.pos, "unexpected end of input inside an object", ErrSyntax)
		}
		if p.data[p.pos] != '"' {
			return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s, expected a string key", show(p.data[p.pos])), ErrSyntax)
		}
		keyOff := p.pos
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if v.has(key) {
			p.path = append(p.path, pathSeg{key: key, isKey: true})
			return nil, p.fail(keyOff, fmt.Sprintf("duplicate key %s", AppendQuote(nil, key)), ErrDuplicateKey)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(p.pos, "expected ':' after object key", ErrSyntax)
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, pathSeg{key: key, isKey: true})
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		v.add(key, int64(keyOff), val)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(p.pos, "unexpected end of input inside an object", ErrSyntax)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
			if p.pos < len(p.data) && p.data[p.pos] == '}' {
				return nil, p.fail(p.pos, "trailing comma before '}'", ErrSyntax)
			}
		case '}':
			p.pos++
			p.depth--
			return v, nil
		default:
			return nil, p.fail(p.pos, fmt.Sprintf("unexpected %s in object, expected ',' or '}'", show(p.data[p.pos])), ErrSyntax)
		}
	}
}

func (v *Value) has(key string) bool {
	if v.index != nil {
		_, ok := v.index[key]
		return ok
	}
	for i := range v.members {
		if v.members[i].Key == key {
			return true
		}
	}
	return false
}

func (v *Value) add(key string, off int64, val *Value) {
	v.members = append(v.members, Member{Key: key, KeyOffset: off, Value: val})
	switch {
	case v.index != nil:
		v.index[key] = len(v.members) - 1
	case len(v.members) == indexThreshold:
		v.index = make(map[string]int, 2*indexThreshold)
		for i, m := range v.members {
			v.index[m.Key] = i
		}
	}
}
