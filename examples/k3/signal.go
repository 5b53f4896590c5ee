package main

import (
	"os"
	"os/signal"
	"syscall"
)

// onSignal calls handle with the first SIGINT or SIGTERM (from sigs, or the process's when sigs
// is nil) after restoring their default action, so that a second one kills the process. stop
// ends the watch; it waits for a handle already running, so that a handler which exits the
// process is not raced by the caller reporting the errors the signal caused.
func onSignal(sigs chan os.Signal, handle func(os.Signal)) (stop func()) {
	if sigs == nil {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			handle(s)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-finished
	}
}

// signalExit is the exit code of a process interrupted by s (128 + the signal number).
func signalExit(s os.Signal) int {
	if s == syscall.SIGTERM {
		return 143
	}
	return 130
}
