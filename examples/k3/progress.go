package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress counts bytes of a long operation: a progress bar (bytes, rate, ETA) when w is a
// terminal, otherwise a plain line every few seconds and at the end, so logs stay readable.
type progress interface {
	add(n int64) // n more bytes done
	finish()     // ends the display with a summary line
}

// newProgress starts a display of total bytes labelled desc on w.
func newProgress(w io.Writer, total int64, desc string) progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barProgress{bar: progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)}
	}
	return &lineProgress{w: w, total: total, desc: desc, start: time.Now(), last: time.Now()}
}

type barProgress struct{ bar *progressbar.ProgressBar }

func (p *barProgress) add(n int64) { p.bar.Add64(n) }
func (p *barProgress) finish()     { p.bar.Finish() }

// lineProgress prints "desc: done of total (pct), MB/s" at most every lineEvery.
type lineProgress struct {
	w           io.Writer
	total, done int64
	desc        string
	start, last time.Time
}

const lineEvery = 5 * time.Second

func (p *lineProgress) add(n int64) {
	p.done += n
	if now := time.Now(); now.Sub(p.last) >= lineEvery {
		p.last = now
		p.line("")
	}
}

func (p *lineProgress) finish() { p.line(" done") }

func (p *lineProgress) line(suffix string) {
	sec := time.Since(p.start).Seconds()
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	rate := 0.0
	if sec > 0 {
		rate = float64(p.done) / 1e6 / sec
	}
	fmt.Fprintf(p.w, "%s: %.3f of %.3f GB (%.1f%%), %.0f MB/s%s\n", p.desc, float64(p.done)/1e9, float64(p.total)/1e9, pct, rate, suffix)
}

// reportTo adapts a library's (done, total) progress callback to a display on w, started by the
// first report of a total of at least minTotal bytes; finish ends the display, if any.
func reportTo(w io.Writer, desc string, minTotal int64) (report func(done, total int64), finish func()) {
	var p progress
	var last int64
	report = func(done, total int64) {
		if total < minTotal {
			return
		}
		if p == nil {
			p = newProgress(w, total, desc)
		}
		if done > last {
			p.add(done - last)
			last = done
		}
	}
	return report, func() {
		if p != nil {
			p.finish()
		}
	}
}
