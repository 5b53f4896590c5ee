//go:build !linux

package tokenizer

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
func lockThread()                      {}
func unlockThread()                    {}
