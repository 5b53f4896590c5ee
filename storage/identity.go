package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// Identity is what a file's metadata says about its content: the inode it
// is, its size and its last modification and status-change times. A write
// into the file moves mtime and ctime; replacing the file by a rename gives
// the path another inode; restoring mtime (touch -d) moves ctime. So two
// equal Identities of a file mean nobody wrote it in between, short of
// changing the clock (§7.7).
type Identity struct {
	Dev, Ino uint64 // 0 when the File does not report them
	Size     int64
	Mtime    int64 // nanoseconds since the epoch
	Ctime    int64 // nanoseconds since the epoch; 0 when not reported
}

// String formats the identity for messages.
func (id Identity) String() string {
	return fmt.Sprintf("inode %d:%d, %d bytes, mtime %s, ctime %s", id.Dev, id.Ino, id.Size,
		time.Unix(0, id.Mtime).UTC().Format(time.RFC3339Nano), time.Unix(0, id.Ctime).UTC().Format(time.RFC3339Nano))
}

// IdentityOf returns f's identity now. For an *os.File it asks fstat(2)
// directly and does not allocate; any other File answers through Stat: its
// size and mtime, and its inode when Sys is a *syscall.Stat_t.
func IdentityOf(f File) (Identity, error) { return identityOf(f) }

// identityOfInfo reads an Identity from a FileInfo whose Sys is not a
// stat structure this platform knows: only the size and mtime.
func identityOfInfo(st fs.FileInfo) Identity {
	return Identity{Size: st.Size(), Mtime: st.ModTime().UnixNano()}
}

// ErrChanged reports a weight file whose identity changed while a model
// was reading it: what was computed from it may mix two files' bytes.
var ErrChanged = errors.New("storage: file changed while in use")

// ChangedError names the file that changed and how. It matches ErrChanged.
type ChangedError struct {
	Path     string
	Was, Now Identity
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s: changed while in use (was %v; now %v)", e.Path, e.Was, e.Now)
}

// Unwrap returns ErrChanged.
func (e *ChangedError) Unwrap() error { return ErrChanged }

// Watch records the identity of every file opened through it, so a model
// can check, before and after each forward pass, that nothing it reads
// changed underneath it (§7.7). Open is an Opener: pass it wherever the
// files are opened. A path opened again must still be the file it was;
// Check compares each file's identity now with the one recorded at its
// first open. Watch keeps its own descriptor of each file, because the
// readers close theirs on their own schedule. It is safe for concurrent use.
type Watch struct {
	open Opener

	mu     sync.Mutex
	files  []watched
	byPath map[string]int
	closed bool
}

type watched struct {
	path string
	f    File
	id   Identity
}

// NewWatch returns a Watch opening files with open (nil: Open).
func NewWatch(open Opener) *Watch {
	if open == nil {
		open = Open
	}
	return &Watch{open: open, byPath: map[string]int{}}
}

// Open opens path with the Watch's Opener and records its identity; a path
// seen before must have the identity recorded then (else *ChangedError).
func (w *Watch) Open(path string) (File, error) {
	f, err := w.open(path)
	if err != nil {
		return nil, err
	}
	id, err := IdentityOf(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("storage: stat %s: %w", path, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if i, ok := w.byPath[path]; ok {
		if was := w.files[i].id; was != id {
			f.Close()
			return nil, &ChangedError{Path: path, Was: was, Now: id}
		}
		return f, nil
	}
	if w.closed {
		f.Close()
		return nil, fmt.Errorf("storage: open %s: the watch is closed", path)
	}
	// The watch's own descriptor: a second open, so the caller keeps sole ownership of f.
	own, err := w.open(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if oid, err := IdentityOf(own); err != nil || oid != id {
		own.Close()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("storage: stat %s: %w", path, err)
		}
		return nil, &ChangedError{Path: path, Was: id, Now: oid}
	}
	w.byPath[path] = len(w.files)
	w.files = append(w.files, watched{path: path, f: own, id: id})
	return f, nil
}

// Check returns a *ChangedError for the first file whose identity differs
// from the one recorded when it was first opened, or nil. With *os.Files
// it does not allocate when nothing changed.
func (w *Watch) Check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.files {
		e := &w.files[i]
		now, err := IdentityOf(e.f)
		if err != nil {
			return fmt.Errorf("storage: stat %s: %w", e.path, err)
		}
		if now != e.id {
			return &ChangedError{Path: e.path, Was: e.id, Now: now}
		}
	}
	return nil
}

// Len returns the number of files watched.
func (w *Watch) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.files)
}

// Close closes the Watch's descriptors; later opens through it fail. A nil
// *Watch is closed already.
func (w *Watch) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var first error
	for _, e := range w.files {
		if err := e.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	w.files, w.byPath, w.closed = nil, nil, true
	return first
}

// size is f's size. For an *os.File on unix it comes from fstat(2) without allocating (File.Stat
// allocates its FileInfo), which matters because the mapped path re-checks every shard's size
// after every forward pass.
func size(f File) (int64, error) {
	id, err := identityOf(f)
	return id.Size, err
}
