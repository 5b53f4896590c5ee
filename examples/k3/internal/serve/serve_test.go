package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/examples/k3/internal/serve"
	"github.com/k3-project/k3/examples/k3/internal/serve/servetest"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/tokenizer"
)

// fixture is one oracle model behind a running server.
type fixture struct {
	name   string
	ref    *testkit.Reference
	tok    *servetest.Tokenizer
	srv    *serve.Server
	url    string
	client openai.Client
}

// prompt and continuation of the reference.
func (f *fixture) prompt() []int       { return f.ref.PromptIDs }
func (f *fixture) continuation() []int { return f.ref.FullIDs[len(f.ref.PromptIDs):] }

// start opens the model at dir with opts and serves it on a loopback port (httptest listens on
// 127.0.0.1:0) until the test ends.
func start(t testing.TB, dir string, lim serve.Limits, key string, opts ...k3.Option) *fixture {
	t.Helper()
	f := &fixture{name: filepath.Base(dir), ref: testkit.LoadReference(t, dir)}
	f.tok = servetest.Write(t, f.ref.FullIDs)
	enc, err := tokenizer.LoadDir(f.tok.Dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := k3.Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cfg := m.Config()
	stop, _ := k3.DefaultStop(enc, &cfg)
	f.srv, err = serve.New(serve.Options{Model: m, Tokens: enc, ModelID: f.name, APIKey: key, Stop: stop, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(f.srv)
	t.Cleanup(hs.Close) // registered after the model's Close, so it runs first
	f.url = hs.URL
	if key == "" {
		key = "not-checked"
	}
	f.client = openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	return f
}

// eachModel runs test on every fixture model, each behind its own server.
func eachModel(t *testing.T, lim serve.Limits, test func(t *testing.T, f *fixture)) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { test(t, start(t, dir, lim, "")) })
	}
}

// post sends body to path and returns the status and the response body.
func post(t testing.TB, ctx context.Context, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, b := testkit.Send(t, req)
	return resp.StatusCode, resp.Header, b
}

// rawCompletion is the part of a completion (or of a streamed chunk) the tests read.
type rawCompletion struct {
	Object  string `json:"object"`
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Tokens       []int   `json:"tokens"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// streamed is a whole server-sent event stream, read raw.
type streamed struct {
	text   string
	tokens []int
	finish string
	usage  int // completion_tokens of the usage chunk, -1 without one
	done   bool
}

// readStream reads events until [DONE] or the end of the body; every event but [DONE] must be
// a completion chunk.
func readStream(t *testing.T, r io.Reader) streamed {
	t.Helper()
	s := streamed{usage: -1}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("stream line %q is not a data line", line)
		}
		if s.done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var c rawCompletion
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "text_completion" {
			t.Fatalf("stream event %q: %v", data, err)
		}
		if c.Usage != nil {
			s.usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			s.text += ch.Text
			s.tokens = append(s.tokens, ch.Tokens...)
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// idsJSON writes ids as a JSON array.
func idsJSON(ids []int) string { b, _ := json.Marshal(ids); return string(b) }

func tokens64(ids []int) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestReferenceContinuation: on every fixture model, greedy completions through the OpenAI
// client and through raw HTTP, streamed and whole, from the prompt as text and as token ids,
// are the reference continuation (reference.json's full_ids after prompt_ids, decoded).
func TestReferenceContinuation(t *testing.T) {
	eachModel(t, serve.Limits{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		want, n := f.tok.Text(f.continuation()), len(f.continuation())
		promptText := f.tok.Text(f.prompt())
		prompts := map[string]openai.CompletionNewParamsPromptUnion{
			"text": {OfString: openai.String(promptText)},
			"ids":  {OfArrayOfTokens: tokens64(f.prompt())},
		}
		for form, p := range prompts {
			params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.name), Prompt: p,
				MaxTokens: openai.Int(int64(n)), Temperature: openai.Float(0)}
			c, err := f.client.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("%s prompt: %v", form, err)
			}
			if len(c.Choices) != 1 || c.Choices[0].Text != want || c.Choices[0].FinishReason != "length" {
				t.Errorf("%s prompt: choices %+v, want text %q finishing by length", form, c.Choices, want)
			}
			if u := c.Usage; u.PromptTokens != int64(len(f.prompt())) || u.CompletionTokens != int64(n) || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("%s prompt: usage %+v", form, u)
			}
			st := f.client.Completions.NewStreaming(ctx, params)
			var text, finish string
			for st.Next() {
				for _, ch := range st.Current().Choices {
					text += ch.Text
					finish = cmpOr(string(ch.FinishReason), finish)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("%s prompt, streamed: %v", form, err)
			}
			if text != want || finish != "length" {
				t.Errorf("%s prompt, streamed: %q finishing by %q, want %q by length", form, text, finish, want)
			}
		}

		// Raw HTTP with return_tokens: the ids themselves, whole and streamed; greedy is also
		// what a request without any sampling field gets.
		body := fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "return_tokens": true}`, idsJSON(f.prompt()), n)
		code, _, b := post(t, ctx, f.url+"/v1/completions", body)
		var c rawCompletion
		if err := json.Unmarshal(b, &c); code != http.StatusOK || err != nil || len(c.Choices) != 1 {
			t.Fatalf("raw: %d %s (%v)", code, b, err)
		}
		if !slices.Equal(c.Choices[0].Tokens, f.continuation()) || c.Choices[0].Text != want {
			t.Errorf("raw: tokens %v text %q, want %v %q", c.Choices[0].Tokens, c.Choices[0].Text, f.continuation(), want)
		}
		body = fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "stream": true, "return_tokens": true, "stream_options": {"include_usage": true}}`, promptText, n)
		resp := postStream(t, ctx, f.url, body)
		s := readStream(t, resp.Body)
		resp.Body.Close()
		if !s.done || s.finish != "length" || s.usage != n || s.text != want || !slices.Equal(s.tokens, f.continuation()) {
			t.Errorf("raw stream: %+v, want tokens %v text %q, usage %d, [DONE]", s, f.continuation(), want, n)
		}

		// A stop string ends the text before it, with finish_reason "stop".
		cut := n / 2
		stop := want[cut : cut+2]
		if i := strings.Index(want, stop); i < cut {
			cut = i // an earlier occurrence stops first
		}
		body = fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "stop": [%q]}`, idsJSON(f.prompt()), n, stop)
		code, _, b = post(t, ctx, f.url+"/v1/completions", body)
		c = rawCompletion{}
		if err := json.Unmarshal(b, &c); code != http.StatusOK || err != nil || len(c.Choices) != 1 {
			t.Fatalf("stop: %d %s (%v)", code, b, err)
		}
		if got := c.Choices[0]; got.Text != want[:cut] || got.FinishReason == nil || *got.FinishReason != "stop" {
			t.Errorf("stop %q: text %q finish %v, want %q by stop", stop, got.Text, got.FinishReason, want[:cut])
		}
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// postStream starts a streaming request and returns the open response (status 200 checked).
func postStream(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	return resp
}

// TestConcurrentClients: 8 clients at once, half through the OpenAI client and half streaming
// raw, each with its own prompt, each get their own continuation. The prompts are prefixes of
// the reference's greedy sequence, so each one's greedy continuation is the rest of it. Their
// forwards share walks (mapped or under a trunk budget); the answers must not change.
func TestConcurrentClients(t *testing.T) {
	eachMode(t, func(t *testing.T, dir string, opts []k3.Option) {
		f := start(t, dir, serve.Limits{MaxConcurrent: 8}, "", opts...)
		concurrent(t, f)
	})
}

// eachMode runs test as a subtest on every fixture model in two modes: its weights mapped, and
// at the trunk floor with cache 0; opts are the mode's model options.
func eachMode(t *testing.T, test func(t *testing.T, dir string, opts []k3.Option)) {
	for _, dir := range testkit.Models(t) {
		floor, err := preset.FloorBudget(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []struct {
			name string
			opts []k3.Option
		}{{"mapped", nil}, {"trunk-floor", []k3.Option{k3.WithTrunkBudget(floor), k3.WithCacheBudget(0)}}} {
			t.Run(filepath.Base(dir)+"/"+mode.name, func(t *testing.T) {
				test(t, dir, mode.opts)
			})
		}
	}
}

func concurrent(t *testing.T, f *fixture) {
	const clients = 8
	full, p := f.ref.FullIDs, len(f.ref.PromptIDs)
	n := len(full) - p - clients + 1
	if n < 2 {
		t.Fatalf("the reference continues by %d tokens: too few for %d clients", len(full)-p, clients)
	}
	var wg sync.WaitGroup
	got := make([]string, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			ctx := context.Background()
			prompt := full[:p+i]
			if i%2 == 0 {
				c, err := f.client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.name),
					Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokens64(prompt)}, MaxTokens: openai.Int(int64(n))})
				if err == nil && len(c.Choices) == 1 {
					got[i] = c.Choices[0].Text
				}
				errs[i] = err
				return
			}
			body := fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "stream": true}`, idsJSON(prompt), n)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/completions", strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			var text strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var c rawCompletion
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					errs[i] = err
					return
				}
				for _, ch := range c.Choices {
					text.WriteString(ch.Text)
				}
			}
			got[i], errs[i] = text.String(), sc.Err()
		})
	}
	wg.Wait()
	for i := range clients {
		want := f.tok.Text(full[p+i : p+i+n])
		if errs[i] != nil || got[i] != want {
			t.Errorf("client %d: %q (%v), want %q", i, got[i], errs[i], want)
		}
	}
	if st := f.srv.Stats(); st.Completed != clients || st.Busy != 0 || st.Active != 0 {
		t.Errorf("stats after %d clients: %+v", clients, st)
	}
}

// waitStats polls the server's counters until cond holds, for at most a minute (the
// cancellation is asynchronous: the handler sees it between tokens).
func waitStats(t *testing.T, srv *serve.Server, what string, cond func(serve.Stats) bool) serve.Stats {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := srv.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDisconnectCancels: a client that goes away, while streaming or while waiting for a whole
// completion, cancels its generation long before max_tokens, as the server's counters show; a
// slot freed that way serves the next request.
func TestDisconnectCancels(t *testing.T) {
	eachModel(t, serve.Limits{MaxConcurrent: 1}, func(t *testing.T, f *fixture) {
		const max = serve.DefaultMaxTokens
		// Streaming: read one chunk, then drop the connection.
		ctx, cancel := context.WithCancel(context.Background())
		resp := postStream(t, ctx, f.url, fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "stream": true, "return_tokens": true}`, idsJSON(f.prompt()), max))
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
			t.Fatalf("first event %q: %v", line, err)
		}
		cancel()
		resp.Body.Close()
		st := waitStats(t, f.srv, "the streamed completion to be cancelled", func(s serve.Stats) bool { return s.Cancelled == 1 && s.Active == 0 || s.Completed > 0 })
		if st.Completed != 0 || st.CancelledTokens >= max {
			t.Errorf("after a disconnect: %+v", st)
		}

		// Whole: cancel once the server is generating.
		ctx, cancel = context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := f.client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.name),
				Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokens64(f.prompt())}, MaxTokens: openai.Int(max)})
			done <- err
		}()
		waitStats(t, f.srv, "the whole completion to start", func(s serve.Stats) bool { return s.Active == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled client got %v", err)
		}
		st = waitStats(t, f.srv, "the whole completion to be cancelled", func(s serve.Stats) bool { return s.Cancelled == 2 && s.Active == 0 || s.Completed > 0 })
		if st.Completed != 0 || st.CancelledTokens >= 2*max {
			t.Errorf("after the second disconnect: %+v", st)
		}

		// The one slot is free again.
		c, err := f.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.name),
			Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: tokens64(f.prompt())}, MaxTokens: openai.Int(2)})
		if err != nil || c.Choices[0].Text != f.tok.Text(f.continuation()[:2]) {
			t.Errorf("after the cancellations: %v %v", c, err)
		}
	})
}

// errorObject checks an OpenAI-style error body and returns it.
func errorObject(t *testing.T, what string, b []byte) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("%s: body %s is not an error object (%v)", what, b, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e.Error[k]; !ok {
			t.Errorf("%s: error object %s has no %q", what, b, k)
		}
	}
	if m, _ := e.Error["message"].(string); m == "" {
		t.Errorf("%s: empty message in %s", what, b)
	}
	return e.Error
}

// TestRefusals: limits, malformed and unsupported requests get a 4xx (or 503) with an error
// object naming the parameter, through raw HTTP and through the OpenAI client.
func TestRefusals(t *testing.T) {
	lim := serve.Limits{MaxBodyBytes: 4096, MaxTokens: 4000, MaxPromptTokens: 32, MaxConcurrent: 1}
	eachModel(t, lim, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		ids := idsJSON(f.prompt())
		long := make([]int, lim.MaxPromptTokens+1)
		cases := []struct {
			name, path, body string
			status           int
			param, code      string
		}{
			{"body over the limit", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 5000) + `"}`, 413, "", "request_too_large"},
			{"max_tokens over the limit", "/v1/completions", `{"prompt": ` + ids + `, "max_tokens": 4001}`, 400, "max_tokens", "max_tokens_out_of_range"},
			{"negative max_tokens", "/v1/completions", `{"prompt": ` + ids + `, "max_tokens": -1}`, 400, "max_tokens", "max_tokens_out_of_range"},
			{"prompt over the limit", "/v1/completions", `{"prompt": ` + idsJSON(long) + `}`, 400, "prompt", "context_length_exceeded"},
			{"truncated JSON", "/v1/completions", `{"prompt": "ab",`, 400, "", "invalid_json"},
			{"not JSON", "/v1/completions", `prompt=ab`, 400, "", "invalid_json"},
			{"two values", "/v1/completions", `{"prompt": "ab"} {}`, 400, "", "invalid_json"},
			{"unknown field", "/v1/completions", `{"prompt": "ab", "temprature": 1}`, 400, "temprature", "invalid_json"},
			{"nested prompt", "/v1/completions", `{"prompt": [[[1]]]}`, 400, "prompt", "invalid_value"},
			{"one prompt in an array", "/v1/completions", `{"prompt": [[1, 2]], "max_tokens": 4001}`, 400, "max_tokens", "max_tokens_out_of_range"},
			{"wrong type", "/v1/completions", `{"prompt": "ab", "max_tokens": "8"}`, 400, "max_tokens", "invalid_json"},
			{"fractional max_tokens", "/v1/completions", `{"prompt": "ab", "max_tokens": 1.5}`, 400, "max_tokens", "invalid_json"},
			{"negative seed", "/v1/completions", `{"prompt": "ab", "seed": -1}`, 400, "seed", "invalid_json"},
			{"no prompt", "/v1/completions", `{"max_tokens": 4}`, 400, "prompt", "invalid_value"},
			{"empty prompt", "/v1/completions", `{"prompt": ""}`, 400, "prompt", "invalid_value"},
			{"empty id list", "/v1/completions", `{"prompt": []}`, 400, "prompt", "invalid_value"},
			{"id outside the vocabulary", "/v1/completions", `{"prompt": [1, 256]}`, 400, "prompt", "invalid_value"},
			{"negative id", "/v1/completions", `{"prompt": [-1]}`, 400, "prompt", "invalid_value"},
			{"two prompts", "/v1/completions", `{"prompt": ["ab", "cd"]}`, 400, "prompt", "invalid_value"},
			{"n = 2", "/v1/completions", `{"prompt": "ab", "n": 2}`, 400, "n", "invalid_value"},
			{"echo", "/v1/completions", `{"prompt": "ab", "echo": true}`, 400, "echo", "invalid_value"},
			{"logprobs", "/v1/completions", `{"prompt": "ab", "logprobs": 2}`, 400, "logprobs", "invalid_value"},
			{"empty stop string", "/v1/completions", `{"prompt": "ab", "stop": [""]}`, 400, "stop", "invalid_value"},
			{"stop_options without stream", "/v1/completions", `{"prompt": "ab", "stream_options": {"include_usage": true}}`, 400, "stream_options", "invalid_value"},
			{"negative temperature", "/v1/completions", `{"prompt": "ab", "temperature": -0.5}`, 400, "temperature", "invalid_value"},
			{"top_p above 1", "/v1/completions", `{"prompt": "ab", "top_p": 1.5}`, 400, "top_p", "invalid_value"},
			{"another model", "/v1/completions", `{"model": "gpt-4", "prompt": "ab"}`, 404, "model", "model_not_found"},
			{"unknown path", "/v1/chat/completions", `{}`, 404, "", "not_found"},
			{"tokenize without content", "/tokenize", `{}`, 400, "content", "invalid_value"},
			{"tokenize add_special", "/tokenize", `{"content": "a", "add_special": true}`, 400, "add_special", "invalid_value"},
			{"detokenize unknown id", "/detokenize", `{"tokens": [1, 99999]}`, 400, "tokens", "invalid_value"},
			{"detokenize bad JSON", "/detokenize", `{"tokens": [1,`, 400, "", "invalid_json"},
			{"key in another case", "/v1/completions", `{"prompt": "ab", "Max_Tokens": 2}`, 400, "Max_Tokens", "invalid_json"},
			{"nested key in another case", "/v1/completions", `{"prompt": "ab", "stream": true, "stream_options": {"INCLUDE_USAGE": true}}`, 400, "stream_options.INCLUDE_USAGE", "invalid_json"},
			{"key twice", "/v1/completions", `{"prompt": "ab", "max_tokens": 1, "max_tokens": 4000}`, 400, "max_tokens", "invalid_json"},
			{"key twice in a map", "/v1/completions", `{"prompt": "ab", "logit_bias": {"1": 0, "1": 0}}`, 400, "logit_bias.1", "invalid_json"},
			{"invalid UTF-8", "/v1/completions", "{\"prompt\": \"a\xffb\"}", 400, "", "invalid_json"},
			{"lone high surrogate", "/v1/completions", `{"prompt": "a\ud800b"}`, 400, "", "invalid_json"},
			{"lone low surrogate", "/tokenize", `{"content": "\udc00"}`, 400, "", "invalid_json"},
			{"detokenize key twice", "/detokenize", `{"tokens": [1], "tokens": [2]}`, 400, "tokens", "invalid_json"},
		}
		for _, c := range cases {
			code, _, b := post(t, ctx, f.url+c.path, c.body)
			if code != c.status {
				t.Errorf("%s: status %d, want %d: %s", c.name, code, c.status, b)
				continue
			}
			e := errorObject(t, c.name, b)
			param, _ := e["param"].(string)
			if param != c.param || e["code"] != c.code {
				t.Errorf("%s: param %q code %v, want %q %q: %s", c.name, param, e["code"], c.param, c.code, b)
			}
		}
		// A wrong method is 405 with the allowed one.
		resp, err := http.Get(f.url + "/v1/completions")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("GET /v1/completions: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
		errorObject(t, "GET /v1/completions", b)

		// The OpenAI client sees the refusal as an API error with the status and the parameter.
		_, err = f.client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(f.name),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("ab")}, MaxTokens: openai.Int(4001)})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "max_tokens" {
			t.Errorf("OpenAI client, max_tokens over the limit: %v", err)
		}

		// Concurrency: with the one slot held by a stream (of 4000 tokens, so it is still running
		// when the next request comes), the next request is 503 at once.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp = postStream(t, sctx, f.url, fmt.Sprintf(`{"prompt": %s, "max_tokens": 4000, "stream": true, "return_tokens": true}`, ids))
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		code, h, b := post(t, ctx, f.url+"/v1/completions", `{"prompt": "ab", "max_tokens": 1}`)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("a request beyond the concurrency limit: %d Retry-After %q: %s", code, h.Get("Retry-After"), b)
		}
		if e := errorObject(t, "busy", b); e["code"] != "server_busy" {
			t.Errorf("busy: %s", b)
		}
		cancel()
		resp.Body.Close()
		waitStats(t, f.srv, "the slot to be released", func(s serve.Stats) bool { return s.Active == 0 })
		if st := f.srv.Stats(); st.Busy != 1 {
			t.Errorf("stats: %+v", st)
		}
		if code, _, b := post(t, ctx, f.url+"/v1/completions", `{"prompt": "ab", "max_tokens": 1}`); code != http.StatusOK {
			t.Errorf("after the slot was released: %d %s", code, b)
		}
	})
}

// TestAPIKey: with a key, every endpoint but /health needs it as a Bearer token.
func TestAPIKey(t *testing.T) {
	dir := testkit.Models(t)[0]
	const key = "sk-test-7f3a"
	f := start(t, dir, serve.Limits{}, key)
	ctx := context.Background()
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", key}, {"Authorization", "Bearer " + key + "x"}} {
		code, _, b := post(t, ctx, f.url+"/tokenize", `{"content": "a"}`, h...)
		if code != http.StatusUnauthorized {
			t.Errorf("header %q: %d %s", h, code, b)
			continue
		}
		if e := errorObject(t, "unauthorized", b); e["code"] != "invalid_api_key" {
			t.Errorf("header %q: %s", h, b)
		}
	}
	if code, _, b := post(t, ctx, f.url+"/tokenize", `{"content": "a"}`, "Authorization", "Bearer "+key); code != http.StatusOK {
		t.Errorf("with the key: %d %s", code, b)
	}
	resp, err := http.Get(f.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health without the key: %d", resp.StatusCode)
	}
	// The OpenAI client sends the key it was given.
	m, err := f.client.Models.List(ctx)
	if err != nil || len(m.Data) != 1 || m.Data[0].ID != f.name {
		t.Errorf("models with the key: %+v %v", m, err)
	}
	bad := openai.NewClient(option.WithBaseURL(f.url+"/v1/"), option.WithAPIKey("nope"), option.WithMaxRetries(0))
	var apiErr *openai.Error
	if _, err := bad.Models.List(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("models with a wrong key: %v", err)
	}
}

// TestTokenizeEndpoints: /tokenize and /detokenize in llama-server's shapes agree with the byte
// table the tokenizer was written from.
func TestTokenizeEndpoints(t *testing.T) {
	dir := testkit.Models(t)[0]
	f := start(t, dir, serve.Limits{}, "")
	ctx := context.Background()
	text := f.tok.Text(f.prompt())
	code, _, b := post(t, ctx, f.url+"/tokenize", fmt.Sprintf(`{"content": %q}`, text))
	var tok struct{ Tokens []int }
	if err := json.Unmarshal(b, &tok); code != http.StatusOK || err != nil || !slices.Equal(tok.Tokens, f.prompt()) {
		t.Errorf("tokenize %q: %d %s, want %v", text, code, b, f.prompt())
	}
	code, _, b = post(t, ctx, f.url+"/tokenize", fmt.Sprintf(`{"content": %q, "with_pieces": true}`, text[:2]))
	want := fmt.Sprintf(`{"tokens":[{"id":%d,"piece":%q},{"id":%d,"piece":%q}]}`, f.prompt()[0], text[:1], f.prompt()[1], text[1:2])
	if code != http.StatusOK || strings.TrimSpace(string(b)) != want {
		t.Errorf("with_pieces: %d %s, want %s", code, b, want)
	}
	// A special name is its id unless parse_special is false.
	for _, c := range []struct {
		body string
		want []int
	}{{`{"content": "[EOS]"}`, []int{257}}, {`{"content": "[EOS]", "parse_special": false}`, nil}} {
		code, _, b := post(t, ctx, f.url+"/tokenize", c.body)
		tok.Tokens = nil
		if err := json.Unmarshal(b, &tok); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", c.body, code, b)
		}
		if c.want != nil && !slices.Equal(tok.Tokens, c.want) || c.want == nil && len(tok.Tokens) != 5 {
			t.Errorf("%s: %v", c.body, tok.Tokens)
		}
	}
	// What the strict reading must still accept: a surrogate pair, an escaped backslash before
	// "ud800" (text, not an escape), the same key in two objects (whatever else the server
	// thinks of a logit_bias).
	for _, body := range []string{`{"content": "\ud83d\ude00"}`, `{"content": "\\ud800"}`} {
		if code, _, b := post(t, ctx, f.url+"/tokenize", body); code != http.StatusOK {
			t.Errorf("%s: %d %s", body, code, b)
		}
	}
	code, _, b = post(t, ctx, f.url+"/v1/completions", `{"prompt": "ab", "max_tokens": 1, "stream": true, "stream_options": {"include_usage": true}, "logit_bias": {"prompt": 0}}`)
	if code == http.StatusBadRequest && strings.Contains(string(b), "invalid_json") {
		t.Errorf("a well-formed request refused as JSON: %s", b)
	}
	code, _, b = post(t, ctx, f.url+"/detokenize", fmt.Sprintf(`{"tokens": %s}`, idsJSON(f.continuation())))
	var det struct{ Content string }
	if err := json.Unmarshal(b, &det); code != http.StatusOK || err != nil || det.Content != f.tok.Text(f.continuation()) {
		t.Errorf("detokenize: %d %s", code, b)
	}
	resp, err := http.Get(f.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(bytes.TrimSpace(b), []byte(`{"status":"ok"}`)) {
		t.Errorf("/health: %d %s", resp.StatusCode, b)
	}
}

// TestSlowBody: a client that sends its body too slowly gets 408 with an error object once
// Limits.BodyTimeout has passed, instead of holding the handler for ever.
func TestSlowBody(t *testing.T) {
	dir := testkit.Models(t)[0]
	f := start(t, dir, serve.Limits{BodyTimeout: 100 * time.Millisecond}, "")
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(f.url, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 100 bytes announced, 10 sent, the rest never.
	if _, err := fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // the test's own bound, far above the server's
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, b)
	}
	if e := errorObject(t, "stalled body", b); e["code"] != "request_timeout" {
		t.Errorf("stalled body: %s", b)
	}

	// The deadline is the body's only: a stream that outlasts it runs to its end.
	const n = 1000
	begin := time.Now()
	resp = postStream(t, context.Background(), f.url, fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "stream": true, "return_tokens": true}`, idsJSON(f.prompt()), n))
	st := readStream(t, resp.Body)
	resp.Body.Close()
	if took := time.Since(begin); took < f.srv.Limits().BodyTimeout {
		t.Fatalf("%d tokens took %v, less than the body timeout: the check proves nothing", n, took)
	}
	if len(st.tokens) != n || st.finish != "length" || !st.done {
		t.Errorf("a stream longer than the body timeout: %d tokens, finish %q, [DONE] %v", len(st.tokens), st.finish, st.done)
	}
}

// gate is a k3.Tracer whose LayerDone, once armed, holds the walk it runs in until opened: the
// requests that arrive meanwhile queue for the next walk, which then carries them together.
type gate struct {
	armed atomic.Bool
	open  chan struct{}
}

func (g *gate) ExpertRequest(int, int)                     {}
func (g *gate) TrunkRead(int, int64, int64, time.Duration) {}
func (g *gate) LayerDone(int, time.Duration) {
	if g.armed.CompareAndSwap(true, false) {
		<-g.open
	}
}

// TestSharedWalks: completions in flight at once share walks over the weights. On every fixture
// model, mapped and at the trunk floor with cache 0, four greedy completions with prompts of
// different lengths run one after the other and then all at once, the first walk of the
// concurrent round held until every request is in: each concurrent completion's ids and text are
// its solo run's (and the reference's), and the server's Stats (the model's walk counters) show
// the same rows carried by fewer walks than the solo runs took.
func TestSharedWalks(t *testing.T) {
	const clients = 4
	eachMode(t, func(t *testing.T, dir string, opts []k3.Option) {
		g := &gate{open: make(chan struct{})}
		f := start(t, dir, serve.Limits{MaxConcurrent: clients}, "", append(opts, k3.WithTracer(g), k3.WithThreads(2))...)
		full, p := f.ref.FullIDs, len(f.ref.PromptIDs)
		n := len(full) - p - clients + 1
		if n < 2 {
			t.Fatalf("the reference continues by %d tokens: too few for %d clients", len(full)-p, clients)
		}
		complete := func(i int) (rawCompletion, error) {
			body := fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "return_tokens": true}`, idsJSON(full[:p+i]), n)
			req, err := http.NewRequest(http.MethodPost, f.url+"/v1/completions", strings.NewReader(body))
			if err != nil {
				return rawCompletion{}, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return rawCompletion{}, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return rawCompletion{}, err
			}
			var c rawCompletion
			if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != http.StatusOK || len(c.Choices) != 1 {
				return c, fmt.Errorf("%d %s (%v)", resp.StatusCode, b, err)
			}
			return c, nil
		}
		solo := make([]rawCompletion, clients)
		before := f.srv.Stats()
		for i := range clients {
			var err error
			if solo[i], err = complete(i); err != nil {
				t.Fatalf("client %d alone: %v", i, err)
			}
			if want := full[p+i : p+i+n]; !slices.Equal(solo[i].Choices[0].Tokens, want) {
				t.Fatalf("client %d alone: %v, want the reference's %v", i, solo[i].Choices[0].Tokens, want)
			}
		}
		mid := f.srv.Stats()
		g.armed.Store(true)
		got := make([]rawCompletion, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() { got[i], errs[i] = complete(i) })
		}
		waitStats(t, f.srv, "every request in flight", func(st serve.Stats) bool { return st.Active == clients })
		time.Sleep(50 * time.Millisecond) // the last ones admitted reach the walker's queue
		close(g.open)
		wg.Wait()
		for i := range clients {
			if errs[i] != nil {
				t.Fatalf("client %d: %v", i, errs[i])
			}
			if c, w := got[i].Choices[0], solo[i].Choices[0]; !slices.Equal(c.Tokens, w.Tokens) || c.Text != w.Text {
				t.Errorf("client %d concurrently: %v %q, alone %v %q", i, c.Tokens, c.Text, w.Tokens, w.Text)
			}
		}
		after := f.srv.Stats()
		soloWalks, soloRows := mid.Walks-before.Walks, mid.WalkRows-before.WalkRows
		walks, rows := after.Walks-mid.Walks, after.WalkRows-mid.WalkRows
		t.Logf("alone: %d walks carried %d rows; concurrently: %d walks carried %d rows", soloWalks, soloRows, walks, rows)
		if rows != soloRows || rows != int64(clients*(p+n-1)+clients*(clients-1)/2) {
			t.Errorf("concurrent rows %d, alone %d: every prompt position and step is one row", rows, soloRows)
		}
		if walks >= soloWalks {
			t.Errorf("concurrent completions took %d walks, as many as alone (%d): they shared none", walks, soloWalks)
		}
	})
}
