package safetensors

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"unsafe"

	"github.com/k3-project/k3/storage"
)

// Guard runs fn, which reads views returned by Bytes, and turns a memory
// fault inside it into an error instead of a crash. A shard truncated while
// it is mapped makes the next access to a page past its new end raise
// SIGBUS; by default the Go runtime then kills the process with a goroutine
// dump. Under Guard the fault becomes a panic that Guard recovers and
// returns as an *Error wrapping ErrFault, naming the shard whose mapping
// holds the faulting address, its offset in the file, and the shard's
// current size when it differs from the size at Open.
//
// Guard covers the calling goroutine only (runtime/debug.SetPanicOnFault is
// per goroutine): work that fn hands to other goroutines must be guarded in
// each of them. A panic that is not a memory fault is re-raised unchanged.
// fn must leave shared state consistent if it stops at any load, because a
// fault abandons it there; discard its output after an error.
//
// Guard costs two SetPanicOnFault calls and a deferred recover; call it
// around a whole forward pass or a worker's share, not per element.
func (c *Checkpoint) Guard(fn func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		re, isRT := r.(runtime.Error)
		af, hasAddr := r.(interface{ Addr() uintptr })
		if !isRT || !hasAddr {
			panic(r)
		}
		err = c.faultError(af.Addr(), re)
	}()
	fn()
	return nil
}

// faultError describes a fault at addr.
func (c *Checkpoint) faultError(addr uintptr, re runtime.Error) error {
	for _, s := range c.shards {
		if s == nil || !s.isMapped.Load() || len(s.mapped) == 0 {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(s.mapped)))
		if addr < base || addr-base >= uintptr(len(s.mapped)) {
			continue
		}
		off := int64(addr - base)
		detail := "offset " + strconv.FormatInt(off, 10) + " of " + strconv.FormatInt(s.size, 10) + " bytes mapped at open"
		if now, err := s.f.Stat(); err == nil && now.Size() != s.size {
			detail += "; the file is now " + strconv.FormatInt(now.Size(), 10) + " bytes (changed since open)"
		}
		return &Error{File: s.path, Pos: -1, Err: ErrFault, Detail: detail}
	}
	return &Error{Pos: -1, Err: ErrFault, Detail: "address 0x" + strconv.FormatUint(uint64(addr), 16) + " outside every shard mapping: " + re.Error()}
}

// CheckSizes re-reads every shard's size and reports (ErrShortRead, naming
// the shard) one that is now shorter than at Open. A shard that shrank by
// less than a page still maps, and its lost tail reads as zeros without any
// fault, so callers holding Bytes views call this at points where a wrong
// answer must not escape (after a forward pass, before reporting a token).
// It costs one fstat per shard. Reads through ReadAt, Read, ReadF32 and
// ReadDirect need no such check: they report ErrShortRead themselves.
func (c *Checkpoint) CheckSizes() error {
	if c.closed.Load() {
		return ErrClosed
	}
	for _, s := range c.shards {
		if err := s.checkSize(); err != nil {
			return err
		}
	}
	return nil
}

func (s *shard) checkSize() error {
	size, err := storage.Size(s.f)
	if err != nil {
		return &Error{File: s.path, Pos: -1, Err: err, Detail: "re-checking the size"}
	}
	if size < s.size {
		return &Error{File: s.path, Pos: -1, Err: ErrShortRead,
			Detail: "file shrank from " + strconv.FormatInt(s.size, 10) + " to " + strconv.FormatInt(size, 10) + " bytes since open"}
	}
	return nil
}
