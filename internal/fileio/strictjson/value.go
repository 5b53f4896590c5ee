package strictjson

import "fmt"

// Kind is the JSON type of a [Value].
type Kind uint8

// The JSON kinds.
const (
	Null Kind = iota + 1
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{Null: "null", Bool: "boolean", Number: "number", String: "string", Array: "array", Object: "object"}

// String returns the kind's JSON name ("object", "number", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Value is one parsed JSON value. It is immutable after parsing; the slices
// returned by Items and Members are shared and must not be modified.
type Value struct {
	kind Kind
	off  int64
	b    bool
	// text is the decoded string for String and the literal text for Number.
	text    string
	items   []*Value
	members []Member
	// index maps keys to member positions for larger objects; small objects
	// are scanned, which is faster than hashing.
	index map[string]int
}

// Member is one key/value pair of an object, in file order.
type Member struct {
	Key string
	// KeyOffset is the byte offset of the key's opening quote.
	KeyOffset int64
	Value     *Value
}

// Kind returns the value's JSON type.
func (v *Value) Kind() Kind { return v.kind }

// Offset returns the byte offset of the value's first byte in the input.
func (v *Value) Offset() int64 { return v.off }

// Items returns the elements of an array, or nil for any other kind.
func (v *Value) Items() []*Value {
	if v.kind != Array {
		return nil
	}
	return v.items
}

// Len returns the number of elements of an array or members of an object, else 0.
func (v *Value) Len() int {
	switch v.kind {
	case Array:
		return len(v.items)
	case Object:
		return len(v.members)
	}
	return 0
}

// Members returns the members of an object in file order, or nil for any other kind.
func (v *Value) Members() []Member {
	if v.kind != Object {
		return nil
	}
	return v.members
}

// Get returns the value of key in an object, or nil when v is not an object
// or has no such key. Keys are unique because duplicates are refused.
func (v *Value) Get(key string) *Value {
	if v == nil || v.kind != Object {
		return nil
	}
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			return v.members[i].Value
		}
		return nil
	}
	for i := range v.members {
		if v.members[i].Key == key {
			return v.members[i].Value
		}
	}
	return nil
}

// Str returns the decoded text of a string value.
func (v *Value) Str() (string, error) {
	if v.kind != String {
		return "", v.typeErr(String)
	}
	return v.text, nil
}

// NumberText returns the literal text of a number exactly as written.
func (v *Value) NumberText() (string, error) {
	if v.kind != Number {
		return "", v.typeErr(Number)
	}
	return v.text, nil
}

// Bool returns the value of true or false. Numbers are not booleans here;
// callers that accept 0/1 decide that themselves.
func (v *Value) Bool() (bool, error) {
	if v.kind != Bool {
		return false, v.typeErr(Bool)
	}
	return v.b, nil
}

// Int64 returns a number's exact integer value. A literal whose value is an
// integer is accepted whatever its spelling (1.0, 1e3, 10e-1, -0); a
// non-integral value returns ErrNotInteger and one outside int64 returns
// ErrRange. The conversion works on the decimal text, never through float64,
// so large integers are not rounded.
func (v *Value) Int64() (int64, error) {
	if v.kind != Number {
		return 0, v.typeErr(Number)
	}
	n, err := parseInt64(v.text)
	if err != nil {
		return 0, &Error{Offset: v.off, Msg: fmt.Sprintf("number %s: %v", v.text, err), Err: err}
	}
	return n, nil
}

// Int is Int64 restricted to the range of the platform's int.
func (v *Value) Int() (int, error) {
	n, err := v.Int64()
	if err != nil {
		return 0, err
	}
	if int64(int(n)) != n {
		return 0, &Error{Offset: v.off, Msg: fmt.Sprintf("number %s does not fit int", v.text), Err: ErrRange}
	}
	return int(n), nil
}

// Float64 returns a number as the nearest float64. A magnitude too large for
// float64 returns ErrRange (never ±Inf); tiny magnitudes round to a
// subnormal or zero as IEEE 754 prescribes.
func (v *Value) Float64() (float64, error) {
	if v.kind != Number {
		return 0, v.typeErr(Number)
	}
	f, err := parseFloat64(v.text)
	if err != nil {
		return 0, &Error{Offset: v.off, Msg: fmt.Sprintf("number %s: %v", v.text, err), Err: err}
	}
	return f, nil
}

func (v *Value) typeErr(want Kind) error {
	return &Error{Offset: v.off, Msg: fmt.Sprintf("%s where %s expected", v.kind, want), Err: ErrType}
}
