package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// strictBody refuses what encoding/json accepts without a word, for a body that has already
// decoded into a value of type typ: invalid UTF-8 and lone UTF-16 surrogate escapes (decoded as
// U+FFFD), a key that names a field only when case is ignored ("Max_Tokens"), and a key given
// twice in one object (the last would win). A client that sent any of these meant something the
// server would otherwise guess.
func strictBody(body []byte, typ reflect.Type) *apiError {
	if !utf8.Valid(body) {
		return &apiError{status: http.StatusBadRequest, code: "invalid_json", msg: "the request body is not valid UTF-8"}
	}
	if off, ok := loneSurrogate(body); ok {
		return &apiError{status: http.StatusBadRequest, code: "invalid_json",
			msg: fmt.Sprintf("the request body escapes a lone UTF-16 surrogate at byte %d, which is no character", off)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return walkKeys(dec, typ, "")
}

// loneSurrogate reports the offset of the first \u escape of a UTF-16 surrogate that is not
// half of a pair. Escapes occur only inside strings of a valid body, and "\\" is skipped
// whole, so a backslash found here always starts an escape.
func loneSurrogate(b []byte) (int, bool) {
	hex := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex(i)
		if !ok {
			i++ // a two-byte escape
			continue
		}
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return i, true
		case r >= 0xd800 && r <= 0xdbff:
			if lo, ok := hex(i + 6); !ok || lo < 0xdc00 || lo > 0xdfff {
				return i, true
			}
			i += 6 // the low half
		}
		i += 5
	}
	return 0, false
}

// walkKeys reads one value from dec, checking the keys of every object in it: those of an
// object that decodes into a struct must be its fields' names exactly, and no object may repeat
// a key. typ is the value's Go type (nil where it is not known, as in a json.RawMessage); path
// names the value in errors.
func walkKeys(dec *json.Decoder, typ reflect.Type, path string) *apiError {
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == reflect.TypeFor[json.RawMessage]() {
		typ = nil
	}
	tok, err := dec.Token()
	if err != nil {
		// The body decoded already: a token error here is the server's fault.
		return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "re-reading the request body: " + err.Error()}
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if typ != nil && typ.Kind() == reflect.Struct {
			fields = jsonFields(typ)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "re-reading the request body: " + err.Error()}
			}
			key := kt.(string)
			name := join(path, key)
			if seen[key] {
				return &apiError{status: http.StatusBadRequest, param: name, code: "invalid_json", msg: fmt.Sprintf("%s is given twice", name)}
			}
			seen[key] = true
			var ft reflect.Type
			switch {
			case fields != nil:
				t, ok := fields[key]
				if !ok {
					for f := range fields {
						if strings.EqualFold(f, key) {
							return &apiError{status: http.StatusBadRequest, param: name, code: "invalid_json",
								msg: fmt.Sprintf("unknown field %q: field names are case-sensitive (%q)", name, join(path, f))}
						}
					}
				}
				ft = t
			case typ != nil && typ.Kind() == reflect.Map:
				ft = typ.Elem()
			}
			if e := walkKeys(dec, ft, name); e != nil {
				return e
			}
		}
	case json.Delim('['):
		var et reflect.Type
		if typ != nil && (typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array) {
			et = typ.Elem()
		}
		for i := 0; dec.More(); i++ {
			if e := walkKeys(dec, et, fmt.Sprintf("%s[%d]", path, i)); e != nil {
				return e
			}
		}
	default:
		return nil // a scalar
	}
	_, err = dec.Token() // the closing delimiter
	if err != nil {
		return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "re-reading the request body: " + err.Error()}
	}
	return nil
}

// jsonFields maps the JSON names of a struct's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
