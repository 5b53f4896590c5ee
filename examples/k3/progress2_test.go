package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
)

// TestPassProgress: a pass that outlasts the quiet time is shown (on a pipe: a line when it
// ends), each pass once; shorter passes show nothing.
func TestPassProgress(t *testing.T) {
	var b bytes.Buffer
	p := &passProgress{w: &b, layers: 4, quiet: 0}
	for range 2 {
		for l := range 4 {
			p.LayerDone(l, time.Millisecond)
		}
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	assert.Len(t, lines, 2, "%q", b.String())
	for _, l := range lines {
		assert.Regexp(t, `^forward pass: 4 of 4 layers \(100%\), [0-9.]+ s done$`, l)
	}
	b.Reset()
	quiet := &passProgress{w: &b, layers: 4, quiet: time.Hour}
	for l := range 4 {
		quiet.LayerDone(l, time.Millisecond)
	}
	assert.Empty(t, b.String())
	// A pass cut short (an error) is closed by the next pass's first layer.
	b.Reset()
	p.LayerDone(0, time.Millisecond)
	p.LayerDone(1, time.Millisecond)
	p.LayerDone(0, time.Millisecond)
	assert.Equal(t, 1, strings.Count(b.String(), "\n"), "%q", b.String())
	assert.Contains(t, b.String(), "2 of 4 layers")
}

// TestRunShowsPasses: run hands its forward passes to the progress display (every pass shown
// when the quiet time is zero), and -q silences it.
func TestRunShowsPasses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, checkpoint.Synthesize(dir, "tiny", 3))
	defer func(q time.Duration) { passQuiet = q }(passQuiet)
	passQuiet = 0
	var out, errb bytes.Buffer
	code := run([]string{"run", dir, "--ids", "1,2,3", "-n", "2", "--no-stop"}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	// The prompt's pass and one step (the second token is not fed back).
	assert.Equal(t, 2, strings.Count(errb.String(), "forward pass: 13 of 13 layers (100%)"), errb.String())
	errb.Reset()
	code = run([]string{"run", dir, "--ids", "1,2,3", "-n", "2", "--no-stop", "-q"}, &out, &errb)
	require.Equal(t, exitOK, code, errb.String())
	assert.Empty(t, errb.String())
}
