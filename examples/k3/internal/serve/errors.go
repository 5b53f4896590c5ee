package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
// after it, at most lim bytes, read within timeout (the deadline ServeHTTP set). It decodes with
// encoding/json/v2 (its module), which refuses what encoding/json lets pass in silence: a key
// that names a field only in another case ("Max_Tokens"), a key given twice (the last would
// win), invalid UTF-8 and escaped lone surrogates (both read as U+FFFD).
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
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return decodeError(err)
	}
	return nil
}

// decodeError is the refusal of a body jsonv2.Unmarshal did not accept, naming the field at
// fault where there is one (a dotted path: stream_options.include_usage).
func decodeError(err error) *apiError {
	e := &apiError{status: http.StatusBadRequest, code: "invalid_json", msg: "the request body is not valid JSON for this endpoint: " + err.Error()}
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			e.param = fieldPath(se.JSONPointer)
			e.msg = fmt.Sprintf("%s is given twice", e.param)
		}
		return e
	}
	if se, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		e.param = fieldPath(se.JSONPointer)
		switch {
		case errors.Is(se.Err, jsonv2.ErrUnknownName):
			e.msg = fmt.Sprintf("unknown field %q (field names are case-sensitive)", e.param)
		case e.param == "":
			e.msg = "the request body must be one JSON object"
		case se.GoType != nil && se.JSONKind != 0:
			kind := se.JSONKind.String()
			switch se.JSONKind {
			case '[':
				kind = "array"
			case '{':
				kind = "object"
			}
			if len(se.JSONValue) > 0 {
				kind += " " + string(se.JSONValue)
			}
			e.msg = fmt.Sprintf("%s: a JSON %s is not a valid %s", e.param, kind, se.GoType)
		}
	}
	return e
}

// fieldPath writes a JSON pointer (/stream_options/include_usage) as the dotted path OpenAI's
// errors give in param.
func fieldPath(p jsontext.Pointer) string {
	return strings.Join(slices.Collect(p.Tokens()), ".")
}
