// Package atomicfile writes an output file so that its name only ever holds
// the previous file or the complete new one, never a prefix of it. Use
// WriteFile for content held in memory and Create (then Commit, with a
// deferred Abort) for content written as it is produced.
//
// The bytes go to a temporary file beside the target, in the same directory
// so that the final rename(2) cannot cross a file system: its name is
// ".<base>.<random>.tmp", created with O_EXCL, so two writers of one target
// never share a temporary and a user's file is never overwritten by one
// (a fixed "<target>.tmp" would be). Commit flushes the file to stable
// storage (fsync), closes it, renames it over the target and syncs the
// directory, so that a crash after Commit returns keeps the new file. Any
// failure before that, and Abort, remove the temporary: a full disk leaves
// the old target in place and nothing that looks complete.
//
// What no library can do for its caller is catch signals: a program that
// wants an interrupt to clean up lets its signal handler cancel the work and
// return through the deferred Abort. A process killed outright leaves only
// a dot-file ending in ".tmp", which no reader of the target's name opens.
//
// Writers of this module that use it: cache/trace (the expert trace and
// expert_hist.json), the CLI's --out reports, manifests, --dump-logits,
// plots and K3ST states (--save-state, chat's /save), and a packed trunk's
// trunk.json. trunk.bin is still written under its own name: a pack is
// complete only once trunk.json, written last, appears.
//
// This package imports only the standard library.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrDone reports a write, Commit or Abort on a File already committed or
// aborted.
var ErrDone = errors.New("atomicfile: file already committed or aborted")

// File is an output being written under a temporary name. It is not safe
// for concurrent use.
type File struct {
	f      *os.File
	target string
	perm   os.FileMode
	done   bool
}

// Create opens a new temporary file beside path for writing. Nothing
// appears at path until Commit. perm is applied as given (the umask is not
// consulted, so that the result does not depend on process state).
func Create(path string, perm os.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("atomicfile: %q does not name a file", path)
	}
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	return &File{f: f, target: path, perm: perm}, nil
}

// Name is the target path.
func (a *File) Name() string { return a.target }

// TempName is the temporary file's path (for messages and tests).
func (a *File) TempName() string { return a.f.Name() }

// Write appends to the temporary file.
func (a *File) Write(p []byte) (int, error) {
	if a.done {
		return 0, ErrDone
	}
	return a.f.Write(p)
}

// WriteAt writes at an offset of the temporary file (a header patched in
// once the length is known).
func (a *File) WriteAt(p []byte, off int64) (int, error) {
	if a.done {
		return 0, ErrDone
	}
	return a.f.WriteAt(p, off)
}

// Commit makes the written bytes the content of the target: fsync, close,
// chmod, rename, then fsync of the directory. On failure the temporary is
// removed and the target is unchanged (a directory fsync failure, after the
// rename, is reported but the new file is in place).
func (a *File) Commit() error {
	if a.done {
		return ErrDone
	}
	a.done = true
	tmp := a.f.Name()
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, a.perm)
	}
	if err == nil {
		err = os.Rename(tmp, a.target)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: writing %s: %w", a.target, err)
	}
	if err := syncDir(filepath.Dir(a.target)); err != nil {
		return fmt.Errorf("atomicfile: %s written, but syncing its directory: %w", a.target, err)
	}
	return nil
}

// Abort closes and removes the temporary file, leaving the target as it
// was. After Commit it does nothing, so it is the deferred call of every
// writer.
func (a *File) Abort() error {
	if a.done {
		return nil
	}
	a.done = true
	a.f.Close()
	if err := os.Remove(a.f.Name()); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return nil
}

// WriteFile writes data to path through a temporary file, as Create, Write
// and Commit.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	a, err := Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := a.Write(data); err != nil {
		a.Abort()
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	return a.Commit()
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// directory (EINVAL) are accepted: there is nothing more to do there.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errInvalid) {
		return err
	}
	return nil
}
