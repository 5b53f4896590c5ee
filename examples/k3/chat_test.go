package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/tokenizer"
)

// oneSession is what k3 run generates (-n n, no stop) after ids in one uninterrupted pass over
// them: the single-session result a conversation's turn must equal.
func oneSession(t *testing.T, dir string, ids []int, n int, extra ...string) string {
	t.Helper()
	r := execK3(t, "", "", append([]string{"run", dir, "--ids", idCSV(ids), "-n", fmt.Sprint(n), "--no-stop", "-q"}, extra...)...)
	require.Equal(t, 0, r.code, r.stderr)
	return r.stdout
}

// TestExecChatIDs drives k3 chat through a pipe on every fixture model (no tokenizer: the
// lines are ids): three turns, a /save and a /load, and an empty line that continues. Every
// turn's output equals k3 run over the whole history so far in one pass, and the same input
// without /save and /load gives the same output.
func TestExecChatIDs(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		ref := loadFixtureRef(t, dir)
		p := ref.PromptIDs
		require.GreaterOrEqual(t, len(p), 6)
		turns := [][]int{p[:3], p[3:5], p[5:], nil}
		state := filepath.Join(t.TempDir(), "conv.k3st")
		var in strings.Builder
		for i, tu := range turns {
			in.WriteString(idCSV(tu) + "\n")
			if i == 1 {
				fmt.Fprintf(&in, "/save %s\n/load %s\n", state, state)
			}
		}
		in.WriteString("/stats\n")
		r := execK3(t, "", in.String(), "chat", dir, "-n", "3", "--no-stop")
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, len(turns), "stdout %q", r.stdout)
		var history []int
		for i, tu := range turns {
			history = append(history, tu...)
			want := oneSession(t, dir, history, 3)
			assert.Equal(t, want, lines[i]+"\n", "%s: turn %d", filepath.Base(dir), i)
			history = append(history, parseCSV(t, lines[i])...)
		}
		saved := len(turns[0]) + 3 + len(turns[1]) + 3 // /save processes the pending id first
		assert.Contains(t, r.stderr, fmt.Sprintf("k3: saved %d positions to %s", saved, state))
		assert.Contains(t, r.stderr, fmt.Sprintf("k3: loaded %d positions from %s", saved, state))
		// The last id generated is not processed until something follows it.
		assert.Contains(t, r.stderr, fmt.Sprintf("k3: %d positions (+1 pending) of 36864; 6 tokens generated", len(history)-1))

		plain := strings.ReplaceAll(in.String(), fmt.Sprintf("/save %s\n/load %s\n", state, state), "")
		r2 := execK3(t, "", plain, "run", dir, "-i", "-n", "3", "--no-stop")
		require.Equal(t, 0, r2.code, r2.stderr)
		assert.Equal(t, r.stdout, r2.stdout, "%s: /save and /load changed the conversation", filepath.Base(dir))
	}
}

// TestExecChatText: the same through the tokenizer of a synthetic checkpoint, with a sampler
// (its random stream is saved and loaded with the state): three text turns, /save, /load. The
// output equals the same conversation without /save and /load, and each turn equals k3 run
// over the history's ids in one pass with the sampler state a single session would have.
func TestExecChatText(t *testing.T) {
	dir := synthDir(t)
	enc, err := tokenizer.LoadDir(dir)
	require.NoError(t, err)
	state := filepath.Join(t.TempDir(), "conv.k3st")
	texts := []string{"Hello", " world", " again"}
	withState := fmt.Sprintf("%s\n%s\n/save %s\n/load %s\n%s\n", texts[0], texts[1], state, state, texts[2])
	plain := strings.Join(texts, "\n") + "\n"
	r := execK3(t, "", withState, "chat", dir, "-n", "4", "--no-stop")
	require.Equal(t, 0, r.code, r.stderr)
	r2 := execK3(t, "", plain, "chat", dir, "-n", "4", "--no-stop")
	require.Equal(t, 0, r2.code, r2.stderr)
	assert.Equal(t, r2.stdout, r.stdout)

	// Greedy: each turn is k3 run over the whole history in one pass. The tiny vocabulary is
	// bytes, so the generated text maps back to ids byte by byte.
	var history []int
	var want strings.Builder
	for _, text := range texts {
		ids, err := enc.Encode(text, tokenizer.AllowSpecial)
		require.NoError(t, err)
		history = append(history, ids...)
		g := oneSession(t, dir, history, 4)
		want.WriteString(g + "\n")
		for i := range len(g) {
			id, ok := enc.TokenID([]byte{g[i]})
			require.True(t, ok)
			history = append(history, id)
		}
	}
	assert.Equal(t, want.String(), r.stdout)

	// With a sampler the saved random stream continues too.
	s1 := execK3(t, "", withState, "chat", dir, "-n", "4", "--no-stop", "--temp", "0.9", "-s", "7")
	s2 := execK3(t, "", plain, "chat", dir, "-n", "4", "--no-stop", "--temp", "0.9", "-s", "7")
	require.Equal(t, 0, s1.code, s1.stderr)
	require.Equal(t, 0, s2.code, s2.stderr)
	assert.Equal(t, s2.stdout, s1.stdout)
}

// TestExecChatCommands: bad commands and inputs are answered on stderr and the conversation
// goes on; /reset starts again (the same line then gives the same reply); a line longer than
// the limit ends the mode with exit 2.
func TestExecChatCommands(t *testing.T) {
	for _, dir := range testkit.Models(t)[:1] {
		in := "1,2,3\n/sav x\n/load\n/load " + filepath.Join(t.TempDir(), "absent") + "\n999\n/reset\n1,2,3\n/quit\n4,5\n"
		r := execK3(t, "", in, "chat", dir, "-n", "2", "--no-stop")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stderr, "unknown command /sav (did you mean /save?)")
		assert.Contains(t, r.stderr, "/load needs a file name")
		assert.Contains(t, r.stderr, "(the conversation is unchanged)")
		assert.Contains(t, r.stderr, "outside the vocabulary")
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 2, "%q (the line after /quit is not read)", r.stdout)
		assert.Equal(t, lines[0], lines[1])
		assert.Equal(t, oneSession(t, dir, []int{1, 2, 3}, 2), lines[0]+"\n")

		long := strings.Repeat("1,", maxPromptBytes) + "1\n"
		r = execK3(t, "", long, "chat", dir, "-n", "2")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "longer than")

		r = execK3(t, "", "", "chat", dir, "--out", "r.json")
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "use /save and /load")
	}
}

// TestExecChatInterrupt: Ctrl-C (SIGINT) while the model writes ends the turn and keeps the
// session, turn after turn: the next line still continues it and the mode ends normally.
func TestExecChatInterrupt(t *testing.T) {
	dir := synthDir(t)
	// Without the tokenizer the lines and the output are ids, and a turn's output ends at the
	// first newline.
	for _, f := range []string{tokenizer.RanksFileName, tokenizer.ConfigFileName} {
		require.NoError(t, os.Remove(filepath.Join(dir, f)))
	}
	cmd := exec.Command(k3Binary(t), "chat", dir, "-n", "4096", "--no-stop")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb syncBuffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	const stopping = "stopping after the token in flight"
	for turn := 1; turn <= 2; turn++ {
		_, err = io.WriteString(in, "1,2,3\n")
		require.NoError(t, err)
		first := make([]byte, 1)
		_, err = io.ReadFull(out, first) // the turn is under way
		require.NoError(t, err)
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(errb.String(), stopping) < turn && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.Equal(t, turn, strings.Count(errb.String(), stopping), errb.String())
		// Drain the rest of the turn, up to its newline.
		for first[0] != '\n' {
			_, err := io.ReadFull(out, first)
			require.NoError(t, err, errb.String())
		}
	}
	rest := make(chan []byte)
	go func() { b, _ := io.ReadAll(out); rest <- b }()
	_, err = io.WriteString(in, "/stats\n/quit\n")
	require.NoError(t, err)
	<-rest
	require.NoError(t, cmd.Wait(), errb.String())
	m := regexp.MustCompile(`(\d+) tokens generated`).FindStringSubmatch(errb.String())
	require.NotNil(t, m, errb.String())
	n, _ := strconv.Atoi(m[1])
	assert.Less(t, n, 2*4096, "the turns were not stopped")
	assert.Positive(t, n)
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec and a reading test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
