package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/trunk"
)

// meter is the CLI's one progress display: how much of a long operation is done, in bytes or
// in counted units (layers). On a terminal it is a bar (with rate and ETA); otherwise a plain
// line every lineEvery and one at the end, so logs stay short.
type meter struct {
	bar         *progressbar.ProgressBar // nil: plain lines
	w           io.Writer
	desc, unit  string // unit "": bytes
	total, done int64
	start, last time.Time
}

// lineEvery is how often a plain-line meter prints.
const lineEvery = 5 * time.Second

// newMeter starts a display of total bytes (unit "") or units labelled desc on w.
func newMeter(w io.Writer, total int64, desc, unit string) *meter {
	m := &meter{w: w, desc: desc, unit: unit, total: total, start: time.Now(), last: time.Now()}
	if isTerminal(w) {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		}
		if unit == "" {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionSetItsString(unit))
		}
		m.bar = progressbar.NewOptions64(total, opts...)
	}
	return m
}

// set records that done bytes or units are done; it never goes back.
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

// line prints "desc: done of total (pct), rate".
func (m *meter) line(suffix string) {
	sec := time.Since(m.start).Seconds()
	pct := 100.0
	if m.total > 0 {
		pct = 100 * float64(m.done) / float64(m.total)
	}
	if m.unit != "" {
		fmt.Fprintf(m.w, "%s: %d of %d %s (%.0f%%), %.1f s%s\n", m.desc, m.done, m.total, m.unit, pct, sec, suffix)
		return
	}
	rate := "-"
	if sec > 0 {
		rate = size(int64(float64(m.done) / sec))
	}
	fmt.Fprintf(m.w, "%s: %s of %s (%.1f%%), %s/s%s\n", m.desc, size(m.done), size(m.total), pct, rate, suffix)
}

// reportTo adapts a library's (done, total) progress callback to a meter of bytes on w, started
// by the first report of a total of at least minTotal bytes; finish ends the display, if any.
func reportTo(w io.Writer, desc string, minTotal int64) (report func(done, total int64), finish func()) {
	var m *meter
	report = func(done, total int64) {
		if total < minTotal {
			return
		}
		if m == nil {
			m = newMeter(w, total, desc, "")
		}
		m.set(done)
	}
	return report, func() {
		if m != nil {
			m.finish()
		}
	}
}

// passQuiet is how long a forward pass runs before its layers are shown: shorter passes (every
// step of a small model) would only flicker. (A variable for the test that shows every pass.)
var passQuiet = 2 * time.Second

// passProgress is a k3.Tracer that shows the layers of a forward pass once it has run longer
// than passQuiet. A pass begins with layer 0 and ends with the last layer.
type passProgress struct {
	w      io.Writer
	layers int
	quiet  time.Duration
	mu     sync.Mutex
	start  time.Time
	m      *meter
}

var _ k3.Tracer = (*passProgress)(nil)

func (p *passProgress) ExpertRequest(layer, expert int)                    {}
func (p *passProgress) TrunkRead(layer int, off, n int64, d time.Duration) {}

func (p *passProgress) LayerDone(layer int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if layer == 0 || p.start.IsZero() {
		p.end()
		p.start = now.Add(-d)
	}
	if p.m == nil && now.Sub(p.start) >= p.quiet && layer+1 < p.layers {
		p.m = newMeter(p.w, int64(p.layers), "forward pass", "layers")
		p.m.start = p.start
	}
	if p.m != nil {
		p.m.set(int64(layer + 1))
	}
	if layer+1 >= p.layers {
		p.end()
		p.start = time.Time{}
	}
}

// end finishes the display of the pass, if one was shown.
func (p *passProgress) end() {
	if p.m != nil {
		p.m.finish()
		p.m = nil
	}
}

// tracers sends every event to each of ts (the trace file and the progress display).
type tracers []k3.Tracer

func (ts tracers) ExpertRequest(layer, expert int) {
	for _, t := range ts {
		t.ExpertRequest(layer, expert)
	}
}

func (ts tracers) TrunkRead(layer int, off, n int64, d time.Duration) {
	for _, t := range ts {
		t.TrunkRead(layer, off, n, d)
	}
}

func (ts tracers) LayerDone(layer int, d time.Duration) {
	for _, t := range ts {
		t.LayerDone(layer, d)
	}
}

// size is the CLI's one way to print a number of bytes: trunk.Size, the library's format, so the
// plan the library prints and the CLI's own lines read alike.
func size(n int64) string { return trunk.Size(n) }
