// Package faultfs injects storage faults under readers that take an opener
// or an io.ReaderAt, so tests can show that every fault ends in a named
// error and never in wrong data, a hang or a crash.
//
// An FS opens real files and applies, per file (matched by base name),
// rules set at any time, also on files already open:
//
//   - EIO(name, off, n): reads touching [off, off+n) fail with syscall.EIO
//     (wrapped in an *fs.PathError), as a bad sector does;
//   - Short(name, off): reads crossing off return the bytes before it and
//     io.EOF, as a file truncated after it was stat'ed does;
//   - Flip(name, off, bit): the byte at off is returned with one bit
//     inverted (bit rot; the file is not modified);
//   - Shrink(name, size): Stat and ReadAt see the file as size bytes long,
//     as a file truncated underneath its reader does.
//
// A *File has the method set of storage.File, so an Opener made of a
// closure reads every weight file through the rules (k3.WithOpener for a
// model, safetensors.WithOpener for a checkpoint):
//
//	ffs := faultfs.New()
//	ffs.Flip("model-00002-of-00003.safetensors", 4096, 3)
//	ck, err := safetensors.Open(dir, safetensors.WithOpener(func(p string) (storage.File, error) {
//		f, err := ffs.Open(p)
//		if err != nil {
//			return nil, err
//		}
//		return f, nil
//	}))
//
// Wrap applies an FS's rules for one name to any io.ReaderAt (a streamed
// trunk or expert reader). Reads counts ReadAt calls per name, so a test
// can also check that a reader did (or did not) go back to the file.
//
// Faults change what readers see, never the files; faults on the mapped
// path (SIGBUS) need a real truncation of a real file (os.Truncate).
// This package imports only the standard library.
package faultfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// FS opens files and injects the faults set on their base names. The zero
// value is not usable; call New. Methods are safe for concurrent use.
type FS struct {
	mu    sync.Mutex
	rules map[string]*rules
	reads map[string]int
}

type span struct{ off, n int64 }

type flip struct {
	off int64
	bit uint8
}

type rules struct {
	eio    []span
	short  []int64
	flips  []flip
	shrink int64 // < 0: none
}

// New returns an FS without faults.
func New() *FS { return &FS{rules: map[string]*rules{}, reads: map[string]int{}} }

func (x *FS) rule(name string) *rules {
	r := x.rules[name]
	if r == nil {
		r = &rules{shrink: -1}
		x.rules[name] = r
	}
	return r
}

// EIO makes reads of name touching [off, off+n) fail with syscall.EIO.
func (x *FS) EIO(name string, off, n int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rule(name).eio = append(x.rule(name).eio, span{off, n})
}

// Short makes reads of name that cross off stop there with io.EOF.
func (x *FS) Short(name string, off int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rule(name).short = append(x.rule(name).short, off)
}

// Flip inverts bit (0..7) of the byte at off in every read of name.
func (x *FS) Flip(name string, off int64, bit uint) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rule(name).flips = append(x.rule(name).flips, flip{off, uint8(bit & 7)})
}

// Shrink makes name appear size bytes long to Stat and ReadAt.
func (x *FS) Shrink(name string, size int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rule(name).shrink = size
}

// Reset removes every fault (read counts are kept).
func (x *FS) Reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rules = map[string]*rules{}
}

// Reads returns how many ReadAt calls reached name.
func (x *FS) Reads(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.reads[name]
}

// snapshot copies the rules for name so a read applies one consistent set.
func (x *FS) snapshot(name string, read bool) rules {
	x.mu.Lock()
	defer x.mu.Unlock()
	if read {
		x.reads[name]++
	}
	r := x.rules[name]
	if r == nil {
		return rules{shrink: -1}
	}
	return rules{eio: append([]span(nil), r.eio...), short: append([]int64(nil), r.short...),
		flips: append([]flip(nil), r.flips...), shrink: r.shrink}
}

// File is an open file seen through an FS. It implements io.ReaderAt,
// io.Closer and Stat, the method set of storage.File.
type File struct {
	x    *FS
	name string
	path string
	r    io.ReaderAt
	c    io.Closer
	stat func() (fs.FileInfo, error)
}

// Open opens path read-only without blocking and, like the library's own
// openers, refuses a non-regular file (ErrNotRegular).
func (x *FS) Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return &File{x: x, name: filepath.Base(path), path: path, r: f, c: f, stat: f.Stat}, nil
}

// ErrNotRegular is returned by Open for a path that is not a regular file.
var ErrNotRegular = errors.New("faultfs: not a regular file")

// Wrap returns a File reading r (size bytes long) under the rules set for
// name; Close is a no-op.
func (x *FS) Wrap(name string, r io.ReaderAt, size int64) *File {
	return &File{x: x, name: name, path: name, r: r, c: nopCloser{},
		stat: func() (fs.FileInfo, error) { return info{name: name, size: size}, nil }}
}

// Close closes the underlying file.
func (f *File) Close() error { return f.c.Close() }

// Stat reports the underlying file's information with the size a Shrink
// rule gives it.
func (f *File) Stat() (fs.FileInfo, error) {
	st, err := f.stat()
	if err != nil {
		return nil, err
	}
	r := f.x.snapshot(f.name, false)
	if r.shrink >= 0 && r.shrink < st.Size() {
		return info{name: st.Name(), size: r.shrink, mode: st.Mode(), mod: st.ModTime()}, nil
	}
	return st, nil
}

// ReadAt reads through the rules: the shrunk size, then short reads, then
// EIO, then bit flips in the bytes returned.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	r := f.x.snapshot(f.name, true)
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.path, Err: syscall.EINVAL}
	}
	end := off + int64(len(p))
	var tail error
	limit := func(at int64) {
		if at < end {
			end = max(at, off)
			tail = io.EOF
		}
	}
	if r.shrink >= 0 {
		limit(r.shrink)
	}
	for _, s := range r.short {
		if s > off {
			limit(s)
		}
	}
	for _, s := range r.eio {
		if s.n > 0 && s.off < end && off < s.off+s.n {
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: syscall.EIO}
		}
	}
	n, err := f.r.ReadAt(p[:end-off], off)
	for _, fl := range r.flips {
		if fl.off >= off && fl.off < off+int64(n) {
			p[fl.off-off] ^= 1 << fl.bit
		}
	}
	if err == nil && tail != nil {
		err = tail
	}
	if err == nil && int64(n) < int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

// info is a FileInfo with an overridden size.
type info struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.size }
func (i info) Mode() fs.FileMode  { return i.mode }
func (i info) ModTime() time.Time { return i.mod }
func (i info) IsDir() bool        { return i.mode.IsDir() }
func (i info) Sys() any           { return nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
