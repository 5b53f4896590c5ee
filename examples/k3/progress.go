package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// meter shows how many bytes of a long operation are done: a progress bar (bytes, rate, ETA)
// when w is a terminal, otherwise a plain line every few seconds and at the end, so logs stay
// readable.
type meter struct {
	bar         *progressbar.ProgressBar // nil: plain lines
	w           io.Writer
	desc        string
	total, done int64
	start, last time.Time
}

// lineEvery is how often a plain-line meter prints.
const lineEvery = 5 * time.Second

// newMeter starts a display of total bytes labelled desc on w.
func newMeter(w io.Writer, total int64, desc string) *meter {
	m := &meter{w: w, desc: desc, total: total, start: time.Now(), last: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		m.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return m
}

// set records that done bytes are done; it never goes back.
func (m *meter) set(done int64) {
	if done <= m.done {
		return
	}
	if m.bar != nil {
		m.bar.Add64(done - m.done)
	}
	m.done = done
	if now := time.Now(); m.bar == nil && now.Sub(m.last) >= lineEvery {
		m.last = now
		m.line("")
	}
}

// finish ends the display with a summary line.
func (m *meter) finish() {
	if m.bar != nil {
		m.bar.Finish()
		return
	}
	m.line(" done")
}

// line prints "desc: done of total (pct), MB/s".
func (m *meter) line(suffix string) {
	sec := time.Since(m.start).Seconds()
	pct := 100.0
	if m.total > 0 {
		pct = 100 * float64(m.done) / float64(m.total)
	}
	rate := 0.0
	if sec > 0 {
		rate = float64(m.done) / 1e6 / sec
	}
	fmt.Fprintf(m.w, "%s: %.3f of %.3f GB (%.1f%%), %.0f MB/s%s\n", m.desc, float64(m.done)/1e9, float64(m.total)/1e9, pct, rate, suffix)
}

// reportTo adapts a library's (done, total) progress callback to a meter on w, started by the
// first report of a total of at least minTotal bytes; finish ends the display, if any.
func reportTo(w io.Writer, desc string, minTotal int64) (report func(done, total int64), finish func()) {
	var m *meter
	report = func(done, total int64) {
		if total < minTotal {
			return
		}
		if m == nil {
			m = newMeter(w, total, desc)
		}
		m.set(done)
	}
	return report, func() {
		if m != nil {
			m.finish()
		}
	}
}
