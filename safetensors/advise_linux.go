//go:build linux

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

func fadvise(f *os.File, off, n int64, a Advice) error {
	var adv int
	switch a {
	case AdviceNormal:
		adv = unix.FADV_NORMAL
	case AdviceSequential:
		adv = unix.FADV_SEQUENTIAL
	case AdviceRandom:
		adv = unix.FADV_RANDOM
	case AdviceWillNeed:
		adv = unix.FADV_WILLNEED
	case AdviceDontNeed:
		adv = unix.FADV_DONTNEED
	}
	return unix.Fadvise(int(f.Fd()), off, n, adv)
}
