package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/k3-project/k3/examples/k3/internal/serve"
	"github.com/k3-project/k3/internal/testkit"
)

// fuzzPaths are the endpoints that read a request body.
var fuzzPaths = []string{"/v1/completions", "/tokenize", "/detokenize"}

// fuzzMaxTokens is the fuzzed servers' max_tokens limit, small so that an accepted completion is
// quick.
const fuzzMaxTokens = 4

// FuzzEndpoints sends arbitrary bodies to every endpoint that reads one, on a server for each
// fixture model: the answer is a 200 carrying what the endpoint returns (a completion, an
// event stream ending in [DONE], tokens, text) or a 4xx with an error object — never a 5xx, a
// panic or a hang.
func FuzzEndpoints(f *testing.F) {
	for _, s := range []struct {
		path uint8
		body string
	}{
		{0, `{"prompt": "ab", "max_tokens": 2}`},
		{0, `{"prompt": [1, 2, 3], "max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "seed": 4}`},
		{0, `{"prompt": "ab", "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}`},
		{0, `{"prompt": "ab", "max_tokens": 3, "stop": ["a", "b"]}`},
		{0, `{"prompt": [[1, 2]], "max_tokens": 2}`},
		{0, `{"prompt": "ab", "max_tokens": 1e3}`},
		{0, `{"prompt": "\ud800", "max_tokens": 2}`},
		{0, `{"prompt": "ab", "max_tokens": 2, "model": null}`},
		{1, `{"content": "ab <|im_end|>", "with_pieces": true}`},
		{1, `{"content": "ab", "parse_special": false}`},
		{2, `{"tokens": [1, 2, 3]}`},
		{2, `{"tokens": []}`},
	} {
		f.Add(s.path, s.body)
	}
	lim := serve.Limits{MaxBodyBytes: 16 << 10, MaxTokens: fuzzMaxTokens, MaxPromptTokens: 64, MaxConcurrent: 1, BodyTimeout: 5 * time.Second}
	var servers []*fixture
	for _, dir := range testkit.Models(f) {
		servers = append(servers, start(f, dir, lim, ""))
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			code, hdr, b := post(t, ctx, s.url+path, body)
			cancel()
			what := s.name + " " + path + " " + body
			switch {
			case code == 200:
				checkAnswer(t, what, path, hdr.Get("Content-Type"), b)
			case code >= 400 && code < 500:
				errorObject(t, what, b)
			default:
				t.Fatalf("%s: status %d: %s", what, code, b)
			}
		}
	})
}

// checkAnswer checks that a 200's body is what path returns.
func checkAnswer(t *testing.T, what, path, contentType string, b []byte) {
	t.Helper()
	if strings.HasPrefix(contentType, "text/event-stream") {
		if s := readStream(t, bytes.NewReader(b)); !s.done || s.finish == "" {
			t.Fatalf("%s: a stream without a finish reason or [DONE]: %s", what, b)
		}
		return
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: 200 with a body that is not a JSON object: %v: %s", what, err, b)
	}
	switch path {
	case "/v1/completions":
		var c rawCompletion
		if err := json.Unmarshal(b, &c); err != nil || c.Object != "text_completion" || len(c.Choices) != 1 ||
			c.Choices[0].FinishReason == nil || c.Usage == nil || c.Usage.CompletionTokens > fuzzMaxTokens {
			t.Fatalf("%s: not one finished completion of at most %d tokens (%v): %s", what, fuzzMaxTokens, err, b)
		}
	case "/tokenize":
		var tk struct {
			Tokens []json.RawMessage `json:"tokens"`
		}
		if err := json.Unmarshal(b, &tk); err != nil || tk.Tokens == nil {
			t.Fatalf("%s: no tokens (%v): %s", what, err, b)
		}
	case "/detokenize":
		if _, ok := v["content"]; !ok || len(v) != 1 {
			t.Fatalf("%s: not a content object: %s", what, b)
		}
	}
}
