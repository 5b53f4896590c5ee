package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/tokenizer"
)

// completionRequest is the body of POST /v1/completions: OpenAI's fields, and llama-server's
// sampler extensions (top_k, min_p, repeat_penalty, repeat_last_n) so that every sampler setting
// of `k3 run` can be asked for. OpenAI fields that k3 does not implement are accepted only at
// the value that means "off", so a client never gets a silently different answer.
type completionRequest struct {
	Model       *string         `json:"model"`
	Prompt      json.RawMessage `json:"prompt"`
	MaxTokens   *int            `json:"max_tokens"`
	Stop        json.RawMessage `json:"stop"`
	Stream      bool            `json:"stream"`
	StreamOpts  *streamOptions  `json:"stream_options"`
	User        *string         `json:"user"` // an end-user label: accepted, not used
	ReturnToken bool            `json:"return_tokens"`

	Temperature      *float64 `json:"temperature"`
	TopP             *float64 `json:"top_p"`
	TopK             *int     `json:"top_k"`
	MinP             *float64 `json:"min_p"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	Seed             *uint64  `json:"seed"`

	N         *int               `json:"n"`
	BestOf    *int               `json:"best_of"`
	Echo      *bool              `json:"echo"`
	Logprobs  *int               `json:"logprobs"`
	Suffix    *string            `json:"suffix"`
	LogitBias map[string]float64 `json:"logit_bias"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// job is a validated completion request.
type job struct {
	prompt  []int
	max     int
	stops   []string
	sampler *sample.Sampler // nil: greedy
	stream  bool
	usage   bool // stream_options.include_usage
	tokens  bool // return_tokens
}

// penaltyWindow is the history the penalties look at when repeat_last_n is not given: k3 run's
// --repeat-last-n default, so both map one setting to one sampler.
const penaltyWindow = 64

// parse validates a request; every refusal names its field.
func (s *Server) parse(q *completionRequest) (*job, *apiError) {
	switch {
	case q.Model != nil && *q.Model != s.o.ModelID:
		return nil, &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
			msg: fmt.Sprintf("model %q is not served here; this server serves %q", *q.Model, s.o.ModelID)}
	case q.N != nil && *q.N != 1:
		return nil, badParam("n", "n = %d: k3 returns one completion per request", *q.N)
	case q.BestOf != nil && *q.BestOf != 1:
		return nil, badParam("best_of", "best_of = %d is not supported (only 1)", *q.BestOf)
	case q.Echo != nil && *q.Echo:
		return nil, badParam("echo", "echo is not supported")
	case q.Logprobs != nil:
		return nil, badParam("logprobs", "logprobs are not supported")
	case q.Suffix != nil && *q.Suffix != "":
		return nil, badParam("suffix", "suffix (insertion) is not supported")
	case len(q.LogitBias) > 0:
		return nil, badParam("logit_bias", "logit_bias is not supported")
	case q.StreamOpts != nil && !q.Stream:
		return nil, badParam("stream_options", "stream_options needs stream: true")
	}
	j := &job{stream: q.Stream, usage: q.StreamOpts != nil && q.StreamOpts.IncludeUsage, tokens: q.ReturnToken}
	var e *apiError
	if j.prompt, e = s.promptIDs(q.Prompt); e != nil {
		return nil, e
	}
	j.max = DefaultCompletionTokens
	if q.MaxTokens != nil {
		j.max = *q.MaxTokens
	}
	if j.max < 0 || j.max > s.lim.MaxTokens {
		return nil, &apiError{status: http.StatusBadRequest, param: "max_tokens", code: "max_tokens_out_of_range",
			msg: fmt.Sprintf("max_tokens = %d is outside [0, %d]", j.max, s.lim.MaxTokens)}
	}
	if j.stops, e = stopStrings(q.Stop); e != nil {
		return nil, e
	}
	if j.sampler, e = newSampler(q); e != nil {
		return nil, e
	}
	return j, nil
}

// newSampler maps the sampling fields onto package sample as k3 run maps its flags: no field
// given is greedy decoding (no sampler); any field given makes a sampler, with the penalty window
// 64 unless repeat_last_n says otherwise and every other field at its "off" value.
func newSampler(q *completionRequest) (*sample.Sampler, *apiError) {
	o := sample.Options{PenaltyWindow: penaltyWindow}
	given := false
	for _, f := range []struct {
		name string
		src  *float64
		dst  *float64
	}{
		{"temperature", q.Temperature, &o.Temperature}, {"top_p", q.TopP, &o.TopP}, {"min_p", q.MinP, &o.MinP},
		{"repeat_penalty", q.RepeatPenalty, &o.RepeatPenalty},
		{"frequency_penalty", q.FrequencyPenalty, &o.FrequencyPenalty}, {"presence_penalty", q.PresencePenalty, &o.PresencePenalty},
	} {
		if f.src != nil {
			*f.dst, given = *f.src, true
		}
	}
	if q.TopK != nil {
		o.TopK, given = *q.TopK, true
	}
	if q.RepeatLastN != nil {
		o.PenaltyWindow, given = *q.RepeatLastN, true
	}
	if q.Seed != nil {
		o.Seed, given = *q.Seed, true
	}
	if !given {
		return nil, nil
	}
	// The ranges of sample.Options, checked here so that the refusal names the field.
	for _, c := range []struct {
		name string
		bad  bool
		want string
	}{
		{"temperature", o.Temperature < 0, ">= 0"},
		{"top_p", o.TopP < 0 || o.TopP > 1, "in [0, 1]"},
		{"top_k", o.TopK < 0, ">= 0"},
		{"min_p", o.MinP < 0 || o.MinP >= 1, "in [0, 1)"},
		{"repeat_penalty", o.RepeatPenalty != 0 && o.RepeatPenalty < 1, ">= 1 (or 0: off)"},
		{"repeat_last_n", o.PenaltyWindow < 0, ">= 0"},
	} {
		if c.bad {
			return nil, badParam(c.name, "%s must be %s", c.name, c.want)
		}
	}
	sm, err := sample.New(o)
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "invalid_value", msg: err.Error()}
	}
	return sm, nil
}

// promptIDs reads the prompt: a string (encoded as the Kimi reference tokenizer does, special
// names becoming their ids, nothing added), an array of token ids, or a one-element array of
// either. Several prompts in one request are refused rather than answered in part.
func (s *Server) promptIDs(raw json.RawMessage) ([]int, *apiError) { return s.promptIn(raw, true) }

// promptIn is promptIDs; outer says whether raw may still be the one-element array around a
// prompt (one level only, so deep nesting cannot make it recurse and copy the body again and
// again).
func (s *Server) promptIn(raw json.RawMessage, outer bool) ([]int, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badParam("prompt", "prompt is required (a string or an array of token ids)")
	}
	var ids []int
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, badParam("prompt", "prompt: %v", err)
		}
		var e *apiError
		if ids, e = s.encode("prompt", text, tokenizer.AllowSpecial); e != nil {
			return nil, e
		}
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, badParam("prompt", "prompt must be a string or an array of token ids")
		}
		if len(items) == 0 {
			return nil, badParam("prompt", "prompt is an empty array")
		}
		if first := bytes.TrimSpace(items[0]); len(first) > 0 && (first[0] == '"' || first[0] == '[') {
			switch {
			case !outer:
				return nil, badParam("prompt", "prompt must be a string or an array of token ids")
			case len(items) > 1:
				return nil, badParam("prompt", "%d prompts in one request: k3 serves one prompt per request", len(items))
			}
			return s.promptIn(first, false)
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, badParam("prompt", "prompt must be a string or an array of integer token ids")
		}
	}
	if len(ids) == 0 {
		return nil, badParam("prompt", "the prompt has no tokens (k3 continues text and needs at least one)")
	}
	if len(ids) > s.lim.MaxPromptTokens {
		return nil, &apiError{status: http.StatusBadRequest, param: "prompt", code: "context_length_exceeded",
			msg: fmt.Sprintf("the prompt is %d tokens, at most %d allowed", len(ids), s.lim.MaxPromptTokens)}
	}
	for i, id := range ids {
		if id < 0 || id >= s.vocab {
			return nil, badParam("prompt", "token %d of the prompt, %d, is outside the vocabulary [0, %d)", i, id, s.vocab)
		}
	}
	return ids, nil
}

// encode tokenizes text; the body limit bounds its length.
func (s *Server) encode(param, text string, mode tokenizer.Mode) ([]int, *apiError) {
	ids, err := s.o.Tokens.Encode(text, mode)
	if err != nil {
		return nil, badParam(param, "%s: %v", param, err)
	}
	return ids, nil
}

// stopStrings reads "stop": null, a string or an array of strings.
func stopStrings(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var stops []string
	if raw[0] == '"' {
		stops = []string{""}
		if err := json.Unmarshal(raw, &stops[0]); err != nil {
			return nil, badParam("stop", "stop: %v", err)
		}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badParam("stop", "stop must be a string or an array of strings")
	}
	if len(stops) > MaxStopStrings {
		return nil, badParam("stop", "%d stop strings, at most %d", len(stops), MaxStopStrings)
	}
	for i, st := range stops {
		if st == "" || len(st) > MaxStopBytes {
			return nil, badParam("stop", "stop string %d is %d bytes; each must be 1 to %d", i, len(st), MaxStopBytes)
		}
	}
	return stops, nil
}

// completion is the response object, whole or one streamed chunk of it.
type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

type choice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	Tokens       []int     `json:"tokens,omitzero"` // return_tokens (llama-server's extension)
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// completions is POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) *apiError {
	var q completionRequest
	if e := readJSON(w, r, s.lim.MaxBodyBytes, s.lim.BodyTimeout, &q); e != nil {
		return e
	}
	j, e := s.parse(&q)
	if e != nil {
		return e
	}
	// A slot is taken only after the request is known to be valid, and never waited for: a full
	// server says so at once instead of holding connections in an unbounded queue.
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.busy.Add(1)
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_busy",
			msg: fmt.Sprintf("all %d generation slots are busy; retry later", s.lim.MaxConcurrent)}
	}
	s.active.Add(1)
	defer s.active.Add(-1)
	return s.generate(r.Context(), w, j)
}

// generate runs one completion and writes it, whole or as server-sent events.
func (s *Server) generate(ctx context.Context, w http.ResponseWriter, j *job) *apiError {
	start := time.Now()
	c := completion{ID: "cmpl-" + strconv.FormatUint(s.nextID.Add(1), 10), Object: "text_completion",
		Created: start.Unix(), Model: s.o.ModelID}
	var text utf8Stream
	var res k3.GenerateResult
	opts := k3.GenerateOptions{MaxTokens: j.max, Stop: s.o.Stop, Sampler: j.sampler, StopStrings: j.stops,
		Tokens: s.o.Tokens, OnText: text.push, OnDone: func(r k3.GenerateResult) { res = r }}
	var ev *events
	if j.stream {
		ev = startEvents(w)
	}
	var ids []int
	var genErr error
	gone := false // the client cannot be written to any more
	for id, err := range s.o.Model.Generate(ctx, j.prompt, opts) {
		if err != nil {
			genErr = err
			break
		}
		ids = append(ids, id)
		if ev == nil {
			continue
		}
		ch := choice{Text: text.take()}
		if j.tokens {
			ch.Tokens = []int{id}
		}
		if ch.Text == "" && ch.Tokens == nil {
			continue // bytes held back: nothing to send yet
		}
		c.Choices = []choice{ch}
		if ev.send(c) != nil {
			gone = true
			break
		}
	}
	u := usage{PromptTokens: len(j.prompt), CompletionTokens: len(ids), TotalTokens: len(j.prompt) + len(ids)}
	switch {
	case gone || ctx.Err() != nil:
		s.cancelled.Add(1)
		s.cancelledTokens.Add(int64(len(ids)))
		s.o.Log.Printf("%s cancelled by the client after %d tokens (%.2f s)", c.ID, len(ids), time.Since(start).Seconds())
		return nil // nobody is listening
	case genErr != nil:
		s.failed.Add(1)
		s.o.Log.Printf("%s failed after %d tokens: %v", c.ID, len(ids), genErr)
		e := &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "generation_failed", msg: genErr.Error()}
		if ev == nil {
			return e
		}
		ev.sendRaw(e.body())
		return nil
	}
	s.completed.Add(1)
	reason := "length"
	if res.Reason == k3.StopID || res.Reason == k3.StopString {
		reason = "stop"
	}
	sec := time.Since(start).Seconds()
	why := reason
	if r := res.Reason.String(); r != reason {
		why += " (" + r + ")" // the API's two reasons hide which stop it was
	}
	s.o.Log.Printf("%s: %d prompt + %d completion tokens, finish %s, %.2f s", c.ID, u.PromptTokens, u.CompletionTokens, why, sec)
	if ev == nil {
		ch := choice{Text: tokenizer.ReplaceInvalidUTF8(res.Text), FinishReason: &reason}
		if j.tokens {
			ch.Tokens = ids
			if ch.Tokens == nil {
				ch.Tokens = []int{}
			}
		}
		c.Choices, c.Usage = []choice{ch}, &u
		writeJSON(w, http.StatusOK, c)
		return nil
	}
	c.Choices = []choice{{Text: text.take(), FinishReason: &reason}}
	if ev.send(c) == nil && j.usage {
		c.Choices, c.Usage = []choice{}, &u
		ev.send(c)
	}
	ev.done()
	return nil
}

// events writes server-sent events, flushing each one so the client sees tokens as they come.
type events struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startEvents(w http.ResponseWriter) *events {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &events{w: w, rc: http.NewResponseController(w)}
}

func (e *events) send(c completion) error { return e.sendRaw(c) }

func (e *events) sendRaw(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (e *events) done() { e.write([]byte("data: [DONE]\n\n")) }

func (e *events) write(b []byte) error {
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.rc.Flush()
}

// utf8Stream gathers the text Generate releases between two events. The library releases
// whole characters only (GenerateOptions.OnText holds back a sequence a later token may
// complete), so every piece is whole characters and replacing each piece's invalid bytes gives
// the text of the whole completion.
type utf8Stream struct{ pending []byte }

func (u *utf8Stream) push(b []byte) { u.pending = append(u.pending, b...) }

// take returns the text released since the last take.
func (u *utf8Stream) take() string {
	s := tokenizer.ReplaceInvalidUTF8(u.pending)
	u.pending = u.pending[:0]
	return s
}
