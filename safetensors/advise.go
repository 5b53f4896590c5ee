package safetensors

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Advice is a hint about how a tensor's bytes will be used.
type Advice uint8

const (
	// AdviceNormal restores the default read-ahead.
	AdviceNormal Advice = iota
	// AdviceSequential: the bytes will be read once, front to back (larger
	// read-ahead).
	AdviceSequential
	// AdviceRandom: scattered reads (no read-ahead).
	AdviceRandom
	// AdviceWillNeed: start reading the bytes in now, ahead of use.
	AdviceWillNeed
	// AdviceDontNeed: the bytes are done with; drop them from the page
	// cache and the mapping so streamed weights do not evict others.
	AdviceDontNeed
)

// String names the advice.
func (a Advice) String() string {
	switch a {
	case AdviceNormal:
		return "normal"
	case AdviceSequential:
		return "sequential"
	case AdviceRandom:
		return "random"
	case AdviceWillNeed:
		return "willneed"
	case AdviceDontNeed:
		return "dontneed"
	}
	return "Advice(" + strconv.Itoa(int(a)) + ")"
}

// Advise passes a to the kernel for t's bytes: posix_fadvise on the file
// and, when the shard is mapped, madvise on the page-aligned part of the
// mapping that covers it. Advice is a hint; shards opened through a custom
// opener ignore it.
func (c *Checkpoint) Advise(t *Tensor, a Advice) error {
	s, err := c.shardOf(t)
	if err != nil {
		return err
	}
	if a > AdviceDontNeed {
		return newErr(t.File, t.Name, -1, ErrOutOfRange, "unknown advice "+a.String())
	}
	f, ok := s.f.(*os.File)
	if !ok || t.Size == 0 {
		return nil
	}
	if err := fadvise(f, t.Offset, t.Size, a); err != nil {
		return withTensor(err, t)
	}
	if !s.isMapped.Load() {
		return nil
	}
	pg := int64(os.Getpagesize())
	lo := t.Offset &^ (pg - 1)
	hi := min((t.Offset+t.Size+pg-1)&^(pg-1), int64(len(s.mapped)))
	if a == AdviceDontNeed {
		// Only whole pages inside the tensor may be dropped: a page shared
		// with a neighbour would throw away its resident bytes too.
		lo = (t.Offset + pg - 1) &^ (pg - 1)
		hi = (t.Offset + t.Size) &^ (pg - 1)
		if hi <= lo {
			return nil
		}
	}
	var adv int
	switch a {
	case AdviceNormal:
		adv = unix.MADV_NORMAL
	case AdviceSequential:
		adv = unix.MADV_SEQUENTIAL
	case AdviceRandom:
		adv = unix.MADV_RANDOM
	case AdviceWillNeed:
		adv = unix.MADV_WILLNEED
	case AdviceDontNeed:
		adv = unix.MADV_DONTNEED
	}
	if err := unix.Madvise(s.mapped[lo:hi], adv); err != nil {
		return withTensor(err, t)
	}
	return nil
}
