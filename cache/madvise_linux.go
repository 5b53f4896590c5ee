package cache

import "golang.org/x/sys/unix"

func adviseHuge(b []byte) error { return unix.Madvise(b, unix.MADV_HUGEPAGE) }
