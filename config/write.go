package config

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MarshalNested returns c as a config.json in the released nested shape:
// text_config holding the language-model fields, linear_attn_config the KDA
// fields and layer map (kda_layers included when c.KDALayers is non-nil),
// the SiTU betas spelled activation_situ_*. The output is deterministic
// (fixed key order, shortest round-tripping floats) and Parse returns a
// Config equal to c. An invalid c is refused with its *ConfigError, since
// writing it would produce a file no reader accepts.
func MarshalNested(c *Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config: refusing to write: %w", err)
	}
	var b bytes.Buffer
	w := &objWriter{b: &b}
	w.open("", 0)
	w.raw("architectures", `["KimiK3ForConditionalGeneration"]`, 1)
	w.str("model_type", "kimi_k3", 1)
	w.open("text_config", 1)
	w.str("model_type", "kimi_k3_text", 2)
	for i := range fields {
		f := &fields[i]
		if f.kda || strings.HasPrefix(f.names[0], "activation_situ") {
			continue
		}
		w.field(f.names[0], f.ptr(c), 2)
	}
	w.open("linear_attn_config", 2)
	for i := range fields {
		f := &fields[i]
		if !f.kda {
			continue
		}
		name := f.names[0]
		if f.aNames != nil {
			name = f.aNames[0]
		}
		if f.typ == tIntList && *f.ptr(c).(*[]int) == nil {
			continue // kda_layers absent
		}
		w.field(name, f.ptr(c), 3)
	}
	w.close(2)
	w.field("activation_situ_beta", &c.SiTUBeta, 2)
	w.field("activation_situ_linear_beta", &c.SiTULinearBeta, 2)
	if c.EOSTokenIDs != nil {
		w.field("eos_token_id", &c.EOSTokenIDs, 2)
	}
	w.close(1)
	w.close(0)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// WriteNested writes MarshalNested(c) to w.
func WriteNested(w io.Writer, c *Config) error {
	data, err := MarshalNested(c)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("config: write: %w", err)
	}
	return nil
}

// objWriter emits indented JSON objects; it tracks whether a comma is due.
type objWriter struct {
	b     *bytes.Buffer
	comma []bool
}

func (w *objWriter) key(k string, depth int) {
	if n := len(w.comma); n > 0 {
		if w.comma[n-1] {
			w.b.WriteByte(',')
		}
		w.comma[n-1] = true
		w.b.WriteByte('\n')
	}
	w.b.WriteString(strings.Repeat("  ", depth))
	if k != "" {
		w.b.WriteString(strconv.Quote(k)) // keys are fixed ASCII identifiers: Go and JSON quoting agree
		w.b.WriteString(": ")
	}
}

func (w *objWriter) open(k string, depth int) {
	w.key(k, depth)
	w.b.WriteByte('{')
	w.comma = append(w.comma, false)
}

func (w *objWriter) close(depth int) {
	w.comma = w.comma[:len(w.comma)-1]
	w.b.WriteByte('\n')
	w.b.WriteString(strings.Repeat("  ", depth))
	w.b.WriteByte('}')
}

func (w *objWriter) raw(k, v string, depth int) {
	w.key(k, depth)
	w.b.WriteString(v)
}

func (w *objWriter) str(k, v string, depth int) {
	w.raw(k, strconv.Quote(v), depth)
}

func (w *objWriter) field(k string, p any, depth int) {
	switch v := p.(type) {
	case *int:
		w.raw(k, strconv.Itoa(*v), depth)
	case *float64:
		w.raw(k, formatFloat(*v), depth)
	case *bool:
		w.raw(k, strconv.FormatBool(*v), depth)
	case *[]int:
		var s strings.Builder
		s.WriteByte('[')
		for i, n := range *v {
			if i > 0 {
				s.WriteString(", ")
			}
			s.WriteString(strconv.Itoa(n))
		}
		s.WriteByte(']')
		w.raw(k, s.String(), depth)
	}
}

// formatFloat writes the shortest decimal that reads back to f exactly, with
// a ".0" on integral values so the file shows they are floats. f is finite
// (Validate ran), so the result is always a JSON number.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
