// Package serve is the HTTP layer of `k3 serve`: an OpenAI-compatible text-completion endpoint
// and llama-server's tokenizer endpoints in front of one k3.Model. Start with New, which takes
// the opened model, its tokenizer and the Limits, and returns a Server to mount as an
// http.Handler; the command owns the listener, the signals and http.Server.Shutdown.
//
// Endpoints:
//
//	POST /v1/completions   OpenAI's text completion (K3 is a base model: there is no chat template,
//	                       so no /v1/chat/completions); stream: true sends server-sent events
//	                       ending with "data: [DONE]"
//	GET  /v1/models        the one model served
//	GET  /health           {"status":"ok"}, without the API key (for load balancers)
//	POST /tokenize         {"content": TEXT} -> {"tokens": [ids]} (llama-server's shape)
//	POST /detokenize       {"tokens": [ids]} -> {"content": TEXT}
//
// Every refusal is an HTTP 4xx or 5xx with an OpenAI-style error object,
// {"error":{"message","type","param","code"}}: malformed JSON, an unknown field, a value out of
// range and an option k3 does not implement are 400 naming the parameter, a body over
// Limits.MaxBodyBytes is 413, a body that has not arrived within Limits.BodyTimeout is 408, a
// missing or wrong API key 401, and a request that finds all
// Limits.MaxConcurrent generation slots busy is 503 with Retry-After (it is not queued without
// bound).
//
// Each completion runs in its own Session of the shared Model, under the request's context: a
// client that disconnects cancels its generation between tokens. The completions in flight
// share walks over the weights (the model gathers the decode steps and prompt chunks of
// sessions running at the same time into one walk, docs/forward.md §4.11): each streamed
// piece of the trunk and each fetched expert serves every request that needs it, and every
// completion is bit for bit what it is alone. Stats.Walks and Stats.WalkRows show the sharing.
// Sampling maps onto package sample exactly as `k3 run`'s flags do, so one
// seed and one set of parameters give the same text from both.
package serve

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/tokenizer"
)

// Limits bound what one request may ask for. A zero field takes the default named beside it.
type Limits struct {
	// MaxBodyBytes is the largest request body (default 1 MiB); a larger one is refused with 413.
	MaxBodyBytes int64
	// MaxTokens is the largest max_tokens (default 4096, k3 run's --gen limit).
	MaxTokens int
	// MaxPromptTokens is the longest prompt in tokens (default 32768, k3 run's limit).
	MaxPromptTokens int
	// MaxConcurrent is how many completions may be in flight at once (default 4); one more is
	// refused with 503. Each holds a Session: Plan.KDAStateBytes plus Plan.MLABytesPerPosition
	// per position.
	MaxConcurrent int
	// BodyTimeout bounds reading a request body (default 30 s), so a client that sends slowly
	// cannot hold a connection open for ever.
	BodyTimeout time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxTokens       = 4096
	DefaultMaxPromptTokens = 32768
	DefaultMaxConcurrent   = 4
	DefaultBodyTimeout     = 30 * time.Second
	// DefaultCompletionTokens is max_tokens when a request leaves it out: OpenAI's documented
	// default for /v1/completions.
	DefaultCompletionTokens = 16
	// MaxStopStrings is the most stop strings a request may give, MaxStopBytes the longest one.
	MaxStopStrings = 16
	MaxStopBytes   = 1024
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = DefaultMaxTokens
	}
	if l.MaxPromptTokens <= 0 {
		l.MaxPromptTokens = DefaultMaxPromptTokens
	}
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = DefaultMaxConcurrent
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	return l
}

// Options configure New.
type Options struct {
	Model  *k3.Model           // required
	Tokens *tokenizer.Encoding // required: prompts are text and completions return text
	// ModelID is the name /v1/models reports and a request's "model" must match when given.
	ModelID string
	// APIKey, when not empty, is required as "Authorization: Bearer KEY" on every endpoint but
	// /health.
	APIKey string
	// Stop are the ids that end every generation (the command passes k3.DefaultStop).
	Stop   []int
	Limits Limits
	// Log receives one line per completion and the failures that have no client left to tell;
	// nil discards them.
	Log *log.Logger
}

// Stats are a Server's counters since New.
type Stats struct {
	Active    int64 // completions generating now
	Completed int64 // completions that ended by a stop or a length limit
	Cancelled int64 // completions whose client went away (its context ended, or a write failed)
	Failed    int64 // completions that ended with a model error
	Busy      int64 // requests refused with 503 because every slot was taken
	// CancelledTokens is how many tokens the cancelled completions had generated in all.
	CancelledTokens int64
	// Walks and WalkRows are the model's k3.Stats counters of the same names (since the model
	// was opened): the walks over the weights its forwards ran and the rows they carried.
	// Concurrent completions share walks, so they need fewer walks for the same rows than
	// one after the other.
	Walks, WalkRows int64
}

// Server serves one model. It is an http.Handler; it is safe for concurrent use.
type Server struct {
	o       Options
	lim     Limits
	vocab   int
	mux     *http.ServeMux
	slots   chan struct{} // one token per completion in flight
	created int64         // Unix seconds of New, the model's "created"
	nextID  atomic.Uint64

	active, completed, cancelled, failed, busy, cancelledTokens atomic.Int64
}

// New returns a Server for o.Model.
func New(o Options) (*Server, error) {
	if o.Model == nil || o.Tokens == nil {
		return nil, errors.New("serve: Options.Model and Options.Tokens are required")
	}
	if o.ModelID == "" {
		return nil, errors.New("serve: Options.ModelID is empty")
	}
	if o.Log == nil {
		o.Log = log.New(io.Discard, "", 0)
	}
	s := &Server{o: o, lim: o.Limits.withDefaults(), vocab: o.Model.Config().Vocab, created: time.Now().Unix()}
	s.slots = make(chan struct{}, s.lim.MaxConcurrent)
	s.mux = http.NewServeMux()
	s.mux.Handle("/v1/completions", s.route(http.MethodPost, s.completions))
	s.mux.Handle("/v1/models", s.route(http.MethodGet, s.models))
	s.mux.Handle("/health", route(http.MethodGet, s.health))
	s.mux.Handle("/tokenize", s.route(http.MethodPost, s.tokenize))
	s.mux.Handle("/detokenize", s.route(http.MethodPost, s.detokenize))
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path), code: "not_found"})
	}))
	return s, nil
}

// Limits returns the limits in force, defaults filled in.
func (s *Server) Limits() Limits { return s.lim }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	ms := s.o.Model.Stats()
	return Stats{Active: s.active.Load(), Completed: s.completed.Load(), Cancelled: s.cancelled.Load(),
		Failed: s.failed.Load(), Busy: s.busy.Load(), CancelledTokens: s.cancelledTokens.Load(),
		Walks: ms.Walks, WalkRows: ms.WalkRows}
}

// ServeHTTP bounds the time the request body may take (Limits.BodyTimeout) and dispatches. The
// deadline covers requests refused before their body is read too: the server drains an unread
// body after the reply, and a stalled client would hold that drain. It does not cut a long
// generation short: net/http lifts it once the body has been read to its end, when it starts
// watching the connection for a disconnect. A connection that cannot take deadlines (a test
// recorder) still has the body size limit.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.lim.BodyTimeout))
	s.mux.ServeHTTP(w, r)
}

// handler is an endpoint that reports a refusal by returning it.
type handler func(w http.ResponseWriter, r *http.Request) *apiError

// route checks the method before h runs; a wrong one is 405 with an error object (ServeMux's
// own 405 is plain text).
func route(method string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method), code: "method_not_allowed"})
			return
		}
		if e := h(w, r); e != nil {
			writeError(w, e)
		}
	})
}

// route is the package route behind the API key check.
func (s *Server) route(method string, h handler) http.Handler {
	return route(method, func(w http.ResponseWriter, r *http.Request) *apiError {
		if e := s.authorize(r); e != nil {
			return e
		}
		return h(w, r)
	})
}

// authorize checks the bearer token in constant time, so the key cannot be guessed byte by byte
// from response times.
func (s *Server) authorize(r *http.Request) *apiError {
	if s.o.APIKey == "" {
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.o.APIKey)) != 1 {
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key",
			msg: "missing or incorrect API key: send Authorization: Bearer KEY"}
	}
	return nil
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) *apiError {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	writeJSON(w, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.o.ModelID, "model", s.created, "k3"}}})
	return nil
}
