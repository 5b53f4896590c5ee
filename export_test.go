package k3

import "time"

// MLACacheBytes lets the external tests see how much a session's MLA caches hold.
func MLACacheBytes(s *Session) int64 { return s.mlaCacheBytes() }

// MLACacheCapBytes returns the bytes a session's MLA caches have allocated (their capacity).
func MLACacheCapBytes(s *Session) int64 {
	var n int64
	for _, c := range s.mla {
		if c != nil {
			n += 4 * int64(cap(c.KV))
		}
	}
	return n
}

// HoldWalks makes m's decode steps queue as if a walk were running and returns release, which
// waits until exactly n steps are queued and hands the oldest the lead: they then run as one
// walk (up to the row bound). It makes the gathering of the shared-walk tests deterministic.
func HoldWalks(m *Model) (release func(n int)) {
	w := &m.walker
	w.mu.Lock()
	w.busy = true
	w.mu.Unlock()
	return func(n int) {
		for QueuedSteps(m) != n {
			time.Sleep(50 * time.Microsecond)
		}
		w.mu.Lock()
		next := w.queue[0]
		next.lead = true
		w.mu.Unlock()
		next.wake <- struct{}{}
	}
}

// QueuedSteps returns how many decode steps wait for a walk of m.
func QueuedSteps(m *Model) int {
	w := &m.walker
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// SetLinger sets how long a leader of m's walks waits for the forwards of the last walk: at
// most 1/share of that walk's time and never over most; share < 0 turns the wait off.
func SetLinger(m *Model, share int, most time.Duration) {
	w := &m.walker
	w.mu.Lock()
	w.share, w.most = share, most
	w.mu.Unlock()
}
