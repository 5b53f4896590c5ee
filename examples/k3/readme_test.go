package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstHour returns the commands of the README's "The CLI: a first hour" block, continuation
// lines joined, without the go build line (the test builds the binary itself).
func firstHour(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "## The CLI: a first hour")
	require.GreaterOrEqual(t, i, 0)
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	require.GreaterOrEqual(t, start, 0)
	s = s[start+len("```sh\n"):]
	block := s[:strings.Index(s, "```")]
	var cmds []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", ""), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "go build") {
			continue
		}
		cmds = append(cmds, line)
	}
	return cmds
}

// TestREADMEFirstHour runs the README's first-hour commands as printed, in order, in one
// directory, and checks the outputs the README quotes.
func TestREADMEFirstHour(t *testing.T) {
	cwd := t.TempDir()
	require.NoError(t, os.Symlink(k3Binary(t), filepath.Join(cwd, "k3")))
	cmds := firstHour(t)
	require.GreaterOrEqual(t, len(cmds), 9, "%q", cmds)
	outs := map[string]string{}
	for _, c := range cmds {
		cmd := exec.Command("sh", "-c", c)
		cmd.Dir = cwd
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", c, out)
		sub := strings.Fields(c[strings.Index(c, "./k3 ")+len("./k3 "):])[0] // the subcommand
		outs[sub] += string(out)
	}
	assert.FileExists(t, filepath.Join(cwd, "r.json"))
	assert.FileExists(t, filepath.Join(cwd, "s.k3st"))
	assert.NoFileExists(t, filepath.Join(cwd, "k3_run.json"))

	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	// The figures the README quotes from these commands.
	od := exec.Command("sh", "-c", `./k3 run m -p "The capital of France is" -n 6 2>/dev/null | od -An -tu1`)
	od.Dir = cwd
	b, err := od.Output()
	require.NoError(t, err)
	assert.Contains(t, string(readme), "prints ` "+strings.TrimSpace(string(b))+"`")
	for _, quoted := range []string{"k3: saved 29 positions to s.k3st", "k3: 29 positions (+0 pending) of 36864; 8 tokens"} {
		assert.Contains(t, outs["chat"], quoted)
		assert.Contains(t, strings.ReplaceAll(string(readme), "\n", " "), quoted)
	}
	assert.Contains(t, outs["ladder"], "[56 115 253 168 28 206 159 99]")
	assert.Contains(t, string(readme), "[56 115 253 168 28 206 159 99]")
}
