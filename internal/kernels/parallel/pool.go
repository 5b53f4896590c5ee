package parallel

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a fixed set of helper goroutines that stay awake between calls.
//
// For starts its goroutines per call, and the cost that matters is not the
// start but the wake-up of the parked thread that runs one: 50–100 µs on the
// small VMs the engine runs on, paid by every split mat-vec, a hundred and
// more per decode step. A Pool's helpers poll for the next call for
// SpinWindow after each one (yielding the processor as they poll) and only
// then park, so back-to-back calls, as in a forward pass, start their chunks
// within a microsecond or two.
//
// Pool.For splits work exactly as For does, with the same chunk boundaries
// for the same (n, workers, grain); chunks are claimed by whichever of the
// caller and the helpers is free, so which goroutine runs a chunk depends on
// timing, but what each chunk computes does not. A Pool runs one call at a
// time: a call made while another is in flight (two sessions of one model
// on two goroutines) runs through For instead.
//
// The zero Pool is not usable; a nil *Pool runs every call through For.
type Pool struct {
	helpers int
	busy    sync.Mutex // held by the call in flight
	// gen is odd while job is published. The caller rewrites job only when no helper is
	// inside it; a helper enters only if gen still holds the value it saw, so a late one
	// never reads a job being rewritten.
	gen    atomic.Uint64
	inside atomic.Int32
	job    poolJob
	wake   chan struct{}
	quit   chan struct{}
	done   sync.WaitGroup
}

// SpinWindow is how long a helper keeps polling for the next call before it
// parks. It bounds the processor time an idle pool burns after each call.
const SpinWindow = 100 * time.Microsecond

// Task is work over index ranges; Pool.Run calls Run(lo, hi) once per chunk, from several
// goroutines at once. A pointer to a reused struct makes a call that allocates nothing, which a
// func literal capturing its arguments cannot.
//
// It is an alias, not a defined type, so that interfaces outside internal/ (quant.Runner,
// attention.Runner, moe.Runner) can spell Run's signature and a *Pool satisfy them.
type Task = interface {
	Run(lo, hi int)
}

// Runner is what the kernels need of a Pool; a nil *Pool is a valid Runner that starts
// goroutines per call.
type Runner interface {
	Run(n, workers, grain int, t Task)
	Limit(workers int) int
}

// RunnerOr returns r, or a nil *Pool when r is nil, so that callers never test for nil.
func RunnerOr(r Runner) Runner {
	if r == nil {
		return (*Pool)(nil)
	}
	return r
}

// funcTask adapts a func to Task; a func value fits an interface without allocating.
type funcTask func(lo, hi int)

func (f funcTask) Run(lo, hi int) { f(lo, hi) }

// poolJob is one call: chunk i of k is [Bounds(n, k, i)).
type poolJob struct {
	n, k     int
	task     Task
	next     atomic.Int64 // next chunk to claim
	left     atomic.Int64 // chunks not yet finished
	panicked atomic.Bool
	panic    any
}

// NewPool starts workers−1 helpers (the caller of For is the last worker).
// workers ≤ 1 returns nil, which runs everything inline or through For.
func NewPool(workers int) *Pool {
	if workers <= 1 {
		return nil
	}
	p := &Pool{
		helpers: workers - 1,
		wake:    make(chan struct{}, workers-1),
		quit:    make(chan struct{}),
	}
	p.done.Add(p.helpers)
	for range p.helpers {
		go p.helper()
	}
	return p
}

// Workers returns how many goroutines a call can use (helpers and caller).
func (p *Pool) Workers() int {
	if p == nil {
		return 1
	}
	return p.helpers + 1
}

// Limit returns how many goroutines Run(n, workers, …) can use: workers,
// capped at Workers for a pool (a nil Pool runs through For, uncapped).
// Callers that keep scratch per chunk size it with Limit, since that, with
// n and grain, fixes the chunks (Chunks(n, p.Limit(workers), grain)).
func (p *Pool) Limit(workers int) int {
	if p == nil {
		return workers
	}
	return min(workers, p.helpers+1)
}

// Close stops the helpers and waits for them. Calls must not overlap Close.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	close(p.quit)
	p.done.Wait()
}

func (p *Pool) helper() {
	defer p.done.Done()
	// Mapped weights fault on a truncated file: make that a panic For's
	// caller can recover (see For), not a crash. Helpers live for the pool,
	// so this is set once.
	debug.SetPanicOnFault(true)
	var last uint64
	for {
		until := time.Now().Add(SpinWindow)
		for {
			if g := p.gen.Load(); g&1 == 1 && g != last {
				p.inside.Add(1)
				if p.gen.Load() == g {
					last = g
					p.job.work()
					until = time.Now().Add(SpinWindow)
				}
				p.inside.Add(-1)
				continue
			}
			if time.Now().After(until) {
				break
			}
			runtime.Gosched()
		}
		select {
		case <-p.wake:
		case <-p.quit:
			return
		}
	}
}

// work claims and runs chunks until none are left.
func (j *poolJob) work() {
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.k {
			return
		}
		lo, hi := Bounds(j.n, j.k, i)
		j.run(lo, hi)
		j.left.Add(-1)
	}
}

func (j *poolJob) run(lo, hi int) {
	defer func() {
		if r := recover(); r != nil && j.panicked.CompareAndSwap(false, true) {
			j.panic = r
		}
	}()
	j.task.Run(lo, hi)
}

// For is For(n, workers, grain, fn) on the pool: the same chunks, at most
// min(workers, p.Workers()) of them, run by the caller and the helpers. A
// panic in any chunk is re-raised on the caller after every chunk has
// returned.
func (p *Pool) For(n, workers, grain int, fn func(lo, hi int)) {
	p.Run(n, workers, grain, funcTask(fn))
}

// Run is For with the work given as a Task. A call that the pool runs, or that runs inline
// (a single chunk), allocates nothing.
func (p *Pool) Run(n, workers, grain int, t Task) {
	workers = p.Limit(workers)
	k := Chunks(n, workers, grain)
	if k <= 1 {
		if k == 1 {
			t.Run(0, n) // inline, and without allocating, with or without a pool
		}
		return
	}
	if p == nil {
		For(n, workers, grain, t.Run)
		return
	}
	if !p.busy.TryLock() {
		For(n, workers, grain, t.Run) // the same chunks
		return
	}
	defer p.busy.Unlock()
	// A helper may still be leaving the previous call's job.
	for p.inside.Load() != 0 {
		runtime.Gosched()
	}
	j := &p.job
	j.n, j.k, j.task, j.panic = n, k, t, nil
	j.next.Store(0)
	j.left.Store(int64(k))
	j.panicked.Store(false)
	p.gen.Add(1) // publish
	for range p.helpers {
		select {
		case p.wake <- struct{}{}:
		default: // the helper is awake (or already has a token)
		}
	}
	j.work()
	// The helpers hold the last chunks: they are running, so wait for them
	// without parking (parking would bring the wake-up cost back).
	for j.left.Load() > 0 {
		runtime.Gosched()
	}
	p.gen.Add(1) // withdraw
	pv := j.panic
	j.task, j.panic = nil, nil // hold no references between calls
	if pv != nil {
		panic(pv)
	}
}
