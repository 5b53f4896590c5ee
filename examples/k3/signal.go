package main

import (
	"os"
	"sync"
)

// atomicSignal records the first signal received.
type atomicSignal struct {
	mu sync.Mutex
	s  os.Signal
}

func (a *atomicSignal) set(s os.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.s == nil {
		a.s = s
	}
}

func (a *atomicSignal) get() os.Signal {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s
}
