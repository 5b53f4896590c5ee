//go:build unix && !linux

package safetensors

import "os"

// fadvise has no portable equivalent outside Linux; madvise still applies.
func fadvise(f *os.File, off, n int64, a Advice) error { return nil }
