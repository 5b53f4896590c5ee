package strictjson

import (
	"encoding/json"
	"strings"
)

// render writes v back as compact JSON, keeping key order and number text,
// so a test can see exactly what the parser kept.
func render(v *Value) string {
	var b strings.Builder
	renderTo(&b, v)
	return b.String()
}

func renderTo(b *strings.Builder, v *Value) {
	switch v.Kind() {
	case Null:
		b.WriteString("null")
	case Bool:
		x, _ := v.Bool()
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case Number:
		t, _ := v.NumberText()
		b.WriteString(t)
	case String:
		s, _ := v.Str()
		b.Write(AppendQuote(nil, s))
	case Array:
		b.WriteByte('[')
		for i, it := range v.Items() {
			if i > 0 {
				b.WriteByte(',')
			}
			renderTo(b, it)
		}
		b.WriteByte(']')
	case Object:
		b.WriteByte('{')
		for i, m := range v.Members() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(AppendQuote(nil, m.Key))
			b.WriteByte(':')
			renderTo(b, m.Value)
		}
		b.WriteByte('}')
	}
}

// toAny converts v to the shape encoding/json produces with UseNumber.
func toAny(v *Value) any {
	switch v.Kind() {
	case Null:
		return nil
	case Bool:
		x, _ := v.Bool()
		return x
	case Number:
		t, _ := v.NumberText()
		return json.Number(t)
	case String:
		s, _ := v.Str()
		return s
	case Array:
		out := make([]any, 0, v.Len())
		for _, it := range v.Items() {
			out = append(out, toAny(it))
		}
		return out
	default:
		out := make(map[string]any, v.Len())
		for _, m := range v.Members() {
			out[m.Key] = toAny(m.Value)
		}
		return out
	}
}

// stdDecode decodes data with encoding/json keeping number text.
func stdDecode(data []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	// encoding/json's Decoder tolerates trailing data; json.Valid does not.
	if !json.Valid(data) {
		return nil, errTrailing
	}
	return out, nil
}

var errTrailing = &Error{Msg: "encoding/json: not a single value", Err: ErrSyntax}
