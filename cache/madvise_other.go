//go:build unix && !linux

package cache

import "errors"

func adviseHuge([]byte) error { return errors.New("cache: MADV_HUGEPAGE is Linux-only") }
