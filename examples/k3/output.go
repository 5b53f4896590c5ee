package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"golang.org/x/term"
)

// stdin is where --prompt-file - and the interactive mode read.
var stdin io.Reader = os.Stdin

// maxPromptBytes bounds a prompt's text from any source (and an interactive line): the longest
// prompt run accepts is maxPrompt ids, and no id of a Kimi vocabulary is 32 bytes long.
const maxPromptBytes = 1 << 20

// isTerminal reports whether w is a terminal (progress bars, the per-token table).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// textOut is the generated output on stdout: the text as the library releases it (whole
// characters, nothing that may still become a stop string), or the ids, comma separated, when
// there is no tokenizer. The first write error is kept; later output is dropped.
type textOut struct {
	w      io.Writer // nil: stdout carries the report instead
	ids    int       // ids written
	wrote  bool      // any text written
	lastNL bool      // the text so far ends with a newline
	err    error
}

func (t *textOut) write(b []byte) {
	if t.w == nil || t.err != nil || len(b) == 0 {
		return
	}
	_, t.err = t.w.Write(b)
	t.wrote, t.lastNL = true, b[len(b)-1] == '\n'
}

// id writes one generated id of a run without a tokenizer.
func (t *textOut) id(id int) {
	b := make([]byte, 0, 12)
	if t.ids > 0 {
		b = append(b, ',')
	}
	t.ids++
	t.write(strconv.AppendInt(b, int64(id), 10))
}

// end closes the output: the id list gets its newline; text gets none (stdout is exactly the
// text), but when diagnostics follow on a terminal they start on a line of their own.
func (t *textOut) end(ids bool, stderr io.Writer) {
	switch {
	case ids && t.ids > 0:
		t.write([]byte{'\n'})
	case t.wrote && !t.lastNL && isTerminal(stderr):
		fmt.Fprintln(stderr)
	}
}

// readPromptFile reads --prompt-file ("-": standard input), at most maxPromptBytes. An
// unreadable or oversized file is a bad argument (exit 2): nothing has been started yet and the
// user has to fix the command line.
func readPromptFile(path string) (string, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", usagef("--prompt-file", "%v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPromptBytes+1))
	switch {
	case err != nil:
		return "", usagef("--prompt-file", "%v", err)
	case len(b) > maxPromptBytes:
		return "", usagef("--prompt-file", "%s is longer than %d bytes", path, maxPromptBytes)
	case !utf8.Valid(b):
		return "", usagef("--prompt-file", "%s is not valid UTF-8", path)
	}
	return string(b), nil
}
