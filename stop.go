package k3

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrContextFull reports a prompt that does not fit in GenerateOptions.MaxContext.
var ErrContextFull = errors.New("k3: context length exceeded")

// TokenBytes maps a token id to the bytes it decodes to; *tokenizer.Encoding implements it.
// Generation needs it for StopStrings and OnText.
type TokenBytes interface {
	TokenBytes(id int) ([]byte, error)
}

// StopReason says why Generate ended.
type StopReason uint8

const (
	StopNone      StopReason = iota // generation has not ended
	StopMaxTokens                   // MaxTokens tokens were emitted
	StopID                          // an id in Stop was emitted (it is the last one yielded)
	StopString                      // the decoded text reached a stop string
	StopContext                     // the session holds MaxContext positions: no further token fits
	StopError                       // an error was yielded (including ctx cancellation)
	StopConsumer                    // the caller stopped the iteration
)

var stopNames = [...]string{"none", "length", "stop_id", "stop_string", "context", "error", "consumer"}

// String returns the JSON name of the reason ("length", "stop_id", "stop_string", ...).
func (r StopReason) String() string {
	if int(r) < len(stopNames) {
		return stopNames[r]
	}
	return fmt.Sprintf("StopReason(%d)", r)
}

// GenerateResult describes a finished generation (GenerateOptions.OnDone).
type GenerateResult struct {
	Reason StopReason
	Err    error // the error yielded when Reason is StopError
	// Tokens is the number of ids yielded.
	Tokens int
	// Text is the generated text when GenerateOptions.Tokens is set: the bytes of the yielded
	// ids, ending just before the stop string when Reason is StopString (bytes, not a string:
	// a token may end inside a UTF-8 sequence). StopText is the stop string that matched.
	Text     []byte
	StopText string
	// Speculative decoding counts: forward passes that verified drafts, draft tokens verified
	// and accepted.
	Verifies, Drafted, Accepted int
}

// stopText matches stop strings on the decoded byte stream. Bytes that could still be the start
// of a stop string are held back, so the released text never holds a stop string or a part of
// one that turns out to complete it.
type stopText struct {
	tok     TokenBytes
	stops   [][]byte
	pending []byte
	out     []byte // every released byte
	onText  func([]byte)
}

func newStopText(tok TokenBytes, stops []string, onText func([]byte)) (*stopText, error) {
	st := &stopText{tok: tok, onText: onText}
	for i, s := range stops {
		if s == "" {
			return nil, fmt.Errorf("k3: generate: stop string %d is empty", i)
		}
		st.stops = append(st.stops, []byte(s))
	}
	return st, nil
}

// push appends id's bytes and releases what is final. It reports the matched stop string.
func (st *stopText) push(id int) (string, error) {
	b, err := st.tok.TokenBytes(id)
	if err != nil {
		return "", fmt.Errorf("k3: generate: decoding token %d: %w", id, err)
	}
	st.pending = append(st.pending, b...)
	// The earliest match wins; among matches starting at the same byte, the first listed.
	at, which := -1, -1
	for i, s := range st.stops {
		if j := bytes.Index(st.pending, s); j >= 0 && (at < 0 || j < at) {
			at, which = j, i
		}
	}
	if at >= 0 {
		st.release(at)
		st.pending = st.pending[:0]
		return string(st.stops[which]), nil
	}
	st.release(len(st.pending) - st.hold())
	return "", nil
}

// hold returns the length of the longest suffix of pending that is a proper prefix of a stop
// string: only there can a later token complete a match.
func (st *stopText) hold() int {
	h := 0
	for _, s := range st.stops {
		for n := min(len(s)-1, len(st.pending)); n > h; n-- {
			if bytes.Equal(st.pending[len(st.pending)-n:], s[:n]) {
				h = n
				break
			}
		}
	}
	return h
}

func (st *stopText) release(n int) {
	if n <= 0 {
		return
	}
	chunk := st.pending[:n]
	st.out = append(st.out, chunk...)
	if st.onText != nil {
		st.onText(chunk)
	}
	st.pending = append(st.pending[:0], st.pending[n:]...)
}

// flush releases the held-back bytes at the end of a generation that no stop string ended.
func (st *stopText) flush() { st.release(len(st.pending)) }
