package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// apiError is a refusal as OpenAI's API reports one: an HTTP status and the error object
// {"message","type","param","code"}.
type apiError struct {
	status int
	msg    string
	typ    string // "" is invalid_request_error
	param  string // the request field at fault, "" for none
	code   string
}

// errorBody is the JSON of an apiError.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.msg, e.typ
	if b.Error.Type == "" {
		b.Error.Type = "invalid_request_error"
	}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

// badParam is a 400 naming the request field at fault.
func badParam(param, format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, code: "invalid_value", msg: fmt.Sprintf(format, a...)}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is a struct of strings and numbers; this cannot fail.
		panic(fmt.Sprintf("serve: encoding a response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readJSON decodes the request body into v strictly: one JSON object, no unknown fields, nothing
// after it, at most lim bytes, read within timeout (the deadline ServeHTTP set), and nothing
// encoding/json would let pass silently (strictBody).
func readJSON(w http.ResponseWriter, r *http.Request, lim int64, timeout time.Duration, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, lim))
	if err != nil {
		if mb, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
				msg: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)}
		}
		// The rest of the body will not be read: close the connection after the reply rather
		// than keep it for a client that stalled or broke the body.
		w.Header().Set("Connection", "close")
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return &apiError{status: http.StatusRequestTimeout, code: "request_timeout",
				msg: fmt.Sprintf("the request body did not arrive within %v", timeout)}
		}
		return &apiError{status: http.StatusBadRequest, code: "body_unreadable", msg: fmt.Sprintf("reading the request body: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e := &apiError{status: http.StatusBadRequest, code: "invalid_json", msg: "the request body is not valid JSON for this endpoint: " + err.Error()}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			e.param, _ = strconv.Unquote(name)
			e.msg = fmt.Sprintf("unknown field %s", name)
		}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			e.param = te.Field
			e.msg = fmt.Sprintf("%s: a JSON %s is not a valid %s", te.Field, te.Value, te.Type)
		}
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return &apiError{status: http.StatusBadRequest, code: "invalid_json", msg: "the request body holds more than one JSON value"}
	}
	return strictBody(body, reflect.TypeOf(v))
}
