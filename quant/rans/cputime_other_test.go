//go:build !unix

package rans

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
