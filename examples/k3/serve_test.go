package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/k3-project/k3/examples/k3/internal/serve/servetest"
	"github.com/k3-project/k3/internal/testkit"
)

// TestServePublicBindNeedsKey: a bind beyond loopback without an API key is refused at start
// (exit 2), before the model is read — the model directory here does not even exist.
func TestServePublicBindNeedsKey(t *testing.T) {
	tk := servetest.Write(t, nil)
	missing := filepath.Join(t.TempDir(), "no-model")
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.7"} {
		code, _, stderr := runCLI(t, "serve", missing, "--tok", tk.Dir, "--host", host, "--port", "0")
		if code != exitUsage || !strings.Contains(stderr, "--api-key") || !strings.Contains(stderr, "not a loopback address") {
			t.Errorf("--host %s without a key: exit %d: %s", host, code, stderr)
		}
	}
	for _, c := range []struct{ args []string }{
		{[]string{"--api-key", "k", "--api-key-file", "f"}},
		{[]string{"--port", "65536"}},
		{[]string{"--parallel", "0"}},
		{[]string{"--max-tokens", "4097"}},
	} {
		args := append([]string{"serve", missing, "--tok", tk.Dir}, c.args...)
		if code, _, stderr := runCLI(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
		}
	}
	// Without --tok, the model directory must hold the tokenizer.
	if code, _, stderr := runCLI(t, "serve", missing); code != exitUsage || !strings.Contains(stderr, "--tok") {
		t.Errorf("no tokenizer: exit %d: %s", code, stderr)
	}
}

// served is a running `k3 serve` (serveModel, the command's body after parsing) on a loopback
// port, with its own signal channel.
type served struct {
	url    string
	sigs   chan os.Signal
	exit   chan int
	exited bool        // the test has received from exit
	log    *syncBuffer // the server's stderr: written by its goroutines, read by the test
	client openai.Client
}

func startServe(t *testing.T, argv ...string) *served {
	t.Helper()
	a, err := parseArgs(argv, serveCmd.flags)
	if err != nil {
		t.Fatal(err)
	}
	a.cmd = "serve"
	o, err := parseServe(a)
	if err != nil {
		t.Fatal(err)
	}
	s := &served{sigs: make(chan os.Signal, 2), exit: make(chan int, 1)}
	ready := make(chan string, 1)
	log := &syncBuffer{}
	s.log = log
	go func() { s.exit <- serveModel(o, log, s.sigs, func(addr string) { ready <- addr }) }()
	select {
	case addr := <-ready:
		s.url = "http://" + addr
	case code := <-s.exit:
		t.Fatalf("k3 serve exited with %d before listening: %s", code, log.String())
	}
	// Whatever a test leaves running is drained and waited for; the log helps a failure.
	t.Cleanup(func() {
		if !s.exited {
			s.sigs <- syscall.SIGTERM
			<-s.exit
		}
		if t.Failed() {
			t.Logf("k3 serve's log:\n%s", log.String())
		}
	})
	s.client = openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return s
}

// TestServeCommand: `k3 serve` on every fixture model answers the reference continuation
// through the OpenAI client, gives the same sampled text as `k3 run` with the same sampler
// settings, and on SIGTERM lets a stream in flight finish before exiting 0.
func TestServeCommand(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := testkit.LoadReference(t, dir)
			tk := servetest.Write(t, ref.FullIDs)
			s := startServe(t, dir, "--tok", tk.Dir, "--host", "127.0.0.1", "--port", "0", "--parallel", "2", "--threads", "2")
			ctx := context.Background()
			cont := ref.FullIDs[len(ref.PromptIDs):]
			prompt := make([]int64, len(ref.PromptIDs))
			for i, id := range ref.PromptIDs {
				prompt[i] = int64(id)
			}
			c, err := s.client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(filepath.Base(dir)),
				Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: prompt}, MaxTokens: openai.Int(int64(len(cont)))})
			if err != nil || len(c.Choices) != 1 || c.Choices[0].Text != tk.Text(cont) {
				t.Fatalf("greedy: %+v %v, want %q", c, err, tk.Text(cont))
			}

			// Sampling: the server and k3 run map the same settings onto the same sampler.
			ids := strings.Trim(jsonText(ref.PromptIDs), "[]")
			const gen = 12
			texts := map[string]string{}
			for _, seed := range []string{"1234", "99"} {
				out := filepath.Join(t.TempDir(), "run.json")
				code, _, stderr := runCLI(t, "run", dir, "--tok", tk.Dir, "--ids", ids, "--gen", itoa(gen),
					"--temperature", "0.9", "--top-p", "0.95", "--top-k", "40", "--repeat-penalty", "1.1", "--seed", seed, "--out", out)
				if code != exitOK {
					t.Fatalf("k3 run: exit %d: %s", code, stderr)
				}
				want, ok := readReport(t, out)["generated_text"].(string)
				if !ok {
					t.Fatalf("k3 run wrote no generated_text")
				}
				body := fmt.Sprintf(`{"prompt": [%s], "max_tokens": %d, "temperature": 0.9, "top_p": 0.95, "top_k": 40, "repeat_penalty": 1.1, "seed": %s}`, ids, gen, seed)
				got := completionText(t, s.url, body)
				if got != want {
					t.Errorf("seed %s: server %q, k3 run %q", seed, got, want)
				}
				texts[seed] = got
			}
			if texts["1234"] == texts["99"] || texts["1234"] == tk.Text(cont[:gen]) {
				t.Errorf("sampling made no difference: seeds give %q and %q, greedy %q", texts["1234"], texts["99"], tk.Text(cont[:gen]))
			}

			// SIGTERM drains: the stream in flight runs to its end, then the command exits 0 and
			// the port is closed.
			const n = 600 // long enough to be in flight when the signal comes
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/completions",
				strings.NewReader(fmt.Sprintf(`{"prompt": [%s], "max_tokens": %d, "stream": true, "return_tokens": true}`, ids, n)))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
				t.Fatalf("first event %q: %v", line, err)
			}
			tokens, finish, done := 1, "", false
			s.sigs <- syscall.SIGTERM
			sc := bufio.NewScanner(br)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				if data == "[DONE]" {
					done = true
					continue
				}
				var ev struct {
					Choices []struct {
						Tokens       []int   `json:"tokens"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				for _, ch := range ev.Choices {
					tokens += len(ch.Tokens)
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
			}
			if tokens != n || finish != "length" || !done {
				t.Errorf("the stream in flight at SIGTERM: %d tokens, finish %q, [DONE] %v; want %d, length, true", tokens, finish, done, n)
			}
			select {
			case code := <-s.exit:
				s.exited = true
				if code != exitOK {
					t.Errorf("k3 serve exited with %d after draining", code)
				}
				if !strings.Contains(s.log.String(), "draining 1 requests in flight") {
					t.Errorf("the stream was not in flight when SIGTERM came: %s", s.log.String())
				}
			case <-time.After(time.Minute):
				t.Fatal("k3 serve did not exit after draining")
			}
			if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "http://"), 5*time.Second); err == nil {
				conn.Close()
				t.Errorf("%s still accepts connections after the drain", s.url)
			}
		})
	}
}

// completionText posts a completion and returns its text.
func completionText(t *testing.T, url, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, b := testkit.Send(t, req)
	var c struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &c); resp.StatusCode != http.StatusOK || err != nil || len(c.Choices) != 1 {
		t.Fatalf("%s: %d %s (%v)", body, resp.StatusCode, b, err)
	}
	return c.Choices[0].Text
}

// TestExecServe: the built binary, as a user starts it, on every fixture model: it prints the
// address it listens on, answers the reference continuation through the OpenAI client, and
// exits 0 with its counters on a real SIGTERM.
func TestExecServe(t *testing.T) {
	bin := k3Binary(t)
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := testkit.LoadReference(t, dir)
			tk := servetest.Write(t, ref.FullIDs)
			cmd := exec.Command(bin, "serve", dir, "--tok", tk.Dir, "--port", "0", "--threads", "1", "--preset", "floor")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := false
			defer func() {
				if !exited {
					cmd.Process.Kill()
					cmd.Wait()
				}
			}()
			lines := make(chan string, 64)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var url string
			var log []string
			timeout := time.After(time.Minute)
			for url == "" {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatalf("k3 serve ended before listening: %s", strings.Join(log, "\n"))
					}
					log = append(log, line)
					if _, rest, ok := strings.Cut(line, "listening on "); ok {
						url, _, _ = strings.Cut(rest, " ")
					}
				case <-timeout:
					t.Fatalf("k3 serve did not listen within a minute: %s", strings.Join(log, "\n"))
				}
			}
			if !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Fatalf("listening on %q, want the loopback default", url)
			}
			client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
			cont := ref.FullIDs[len(ref.PromptIDs):]
			c, err := client.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(filepath.Base(dir)),
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(tk.Text(ref.PromptIDs))},
				MaxTokens: openai.Int(int64(len(cont))), Temperature: openai.Float(0)})
			if err != nil || len(c.Choices) != 1 || c.Choices[0].Text != tk.Text(cont) {
				t.Errorf("greedy at the trunk floor: %+v %v, want %q", c, err, tk.Text(cont))
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for line := range lines {
				log = append(log, line)
			}
			err = cmd.Wait()
			exited = true
			all := strings.Join(log, "\n")
			if err != nil || !strings.Contains(all, "drained; 1 completions served") {
				t.Errorf("after SIGTERM: %v\n%s", err, all)
			}
		})
	}
}

// TestServeAPIKeyFile: --api-key-file reads the key from the file's first line; an empty or
// missing file is a usage error; with the key set, requests need it.
func TestServeAPIKeyFile(t *testing.T) {
	dir := testkit.Models(t)[0]
	tk := servetest.Write(t, testkit.LoadReference(t, dir).FullIDs)
	tmp := t.TempDir()
	empty, keyFile := filepath.Join(tmp, "empty"), filepath.Join(tmp, "key")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("sk-file-key\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{empty, filepath.Join(tmp, "missing")} {
		if code, _, stderr := runCLI(t, "serve", dir, "--tok", tk.Dir, "--api-key-file", f); code != exitUsage || !strings.Contains(stderr, "--api-key-file") {
			t.Errorf("--api-key-file %s: exit %d: %s", f, code, stderr)
		}
	}
	s := startServe(t, dir, "--tok", tk.Dir, "--port", "0", "--api-key-file", keyFile)
	for key, want := range map[string]int{"": http.StatusUnauthorized, "sk-file-key\nignored": http.StatusUnauthorized, "sk-file-key": http.StatusOK} {
		req, err := http.NewRequest(http.MethodGet, s.url+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+strings.ReplaceAll(key, "\n", " "))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
}
