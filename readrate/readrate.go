// Package readrate measures how fast a file system delivers a file's bytes
// to this process, the rate that bounds k3's seconds per token once weights
// stream from disk: aligned O_DIRECT reads at a queue depth (as the trunk
// ring and the expert store read) and buffered reads through the page cache.
//
// Start with Direct on a model's largest shard (LargestShard); TempFile
// writes a file to measure a file system that holds no model, and Target
// picks between the two.
package readrate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/k3-project/k3/storage"
	"golang.org/x/sys/unix"
)

// Chunk is the size of one read, the trunk ring's read size.
const Chunk = 8 << 20

// Result is one measurement.
type Result struct {
	Method  string // e.g. "O_DIRECT queue depth 16" or "buffered"
	Bytes   int64
	Seconds float64
	Err     error // the first read error; Bytes counts what was read before it
}

// MBs is the rate in decimal megabytes a second, 0 for a failed or empty
// measurement.
func (r Result) MBs() float64 {
	if r.Err != nil || r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Seconds
}

// Direct reads path in aligned Chunk-sized O_DIRECT reads, depth of them in
// flight, each reader walking its own stride, until the file, maxBytes (0:
// no cap) or the time limit (0: none) ends. Where the file system refuses
// O_DIRECT the reads are buffered, and Method says so.
func Direct(path string, depth int, limit time.Duration, maxBytes int64) Result {
	r := Result{Method: fmt.Sprintf("O_DIRECT queue depth %d", depth)}
	st, err := os.Stat(path)
	if err != nil {
		r.Err = err
		return r
	}
	d, err := storage.OpenReader(path)
	if err != nil {
		r.Err = err
		return r
	}
	defer d.Close()
	if why := d.FallbackReason(); why != nil {
		r.Method += " (buffered fallback: " + why.Error() + ")"
	}
	size := st.Size()
	if maxBytes > 0 {
		size = min(size, maxBytes)
	}
	n := size / Chunk
	if n == 0 {
		r.Err = fmt.Errorf("readrate: %s: smaller than one %d-byte read", path, Chunk)
		return r
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range depth {
		buf, err := storage.AllocAligned(Chunk)
		if err != nil {
			r.Err = err
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer storage.FreeAligned(buf)
			var got int64
			var werr error
			for i := int64(w); i < n && (limit <= 0 || time.Since(t0) < limit); i += int64(depth) {
				if _, werr = d.ReadAligned(buf, i*Chunk, Chunk); werr != nil {
					break
				}
				got += Chunk
			}
			mu.Lock()
			r.Bytes += got
			if werr != nil && r.Err == nil {
				r.Err = werr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(t0).Seconds()
	return r
}

// Buffered reads path front to back in Chunk-sized reads until its end or
// the time limit, after asking the kernel to drop its cached pages (a file
// read moments ago would otherwise be measured from memory; pages another
// process maps stay).
func Buffered(path string, limit time.Duration) Result {
	r := Result{Method: "buffered"}
	f, err := os.Open(path)
	if err != nil {
		r.Err = err
		return r
	}
	defer f.Close()
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) // advisory
	buf := make([]byte, Chunk)
	t0 := time.Now()
	for off := int64(0); limit <= 0 || time.Since(t0) < limit; off += Chunk {
		k, err := f.ReadAt(buf, off)
		r.Bytes += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.Err = err
			break
		}
	}
	r.Seconds = time.Since(t0).Seconds()
	return r
}

// LargestShard returns the largest *.safetensors file of dir and its size,
// "" when dir has none.
func LargestShard(dir string) (path string, size int64) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			path, size = p, st.Size()
		}
	}
	return path, size
}

// Sparse reports whether fewer than 90% of a file's bytes are allocated on
// disk: its holes read as zeros without touching the device, so it cannot
// be timed (a synthetic checkpoint's shards are sparse).
func Sparse(path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	return st.Blocks*512 < st.Size/10*9
}

// minWrite is what TempFile writes whatever its time limit.
const minWrite = 64 << 20

// TempFile writes a file of up to size bytes of non-zero data in dir,
// synced and dropped from the page cache, to be measured and then removed
// by the caller. Writing stops at writeLimit once 64 MiB are written, so a
// slow disk keeps a check short; the file then holds what was written.
func TempFile(dir string, size int64, writeLimit time.Duration) (path string, err error) {
	f, err := os.CreateTemp(dir, ".k3-readrate-*")
	if err != nil {
		return "", fmt.Errorf("readrate: %w", err)
	}
	buf := make([]byte, Chunk)
	for i := range buf {
		buf[i] = byte(i*131 + i>>9) // not zeros, so no file system can elide the data
	}
	deadline := time.Now().Add(writeLimit)
	written := int64(0)
	for written < size && err == nil && (written < minWrite || time.Now().Before(deadline)) {
		var k int
		k, err = f.Write(buf[:min(int64(len(buf)), size-written)])
		written += int64(k)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = unix.Fadvise(int(f.Fd()), 0, written, unix.FADV_DONTNEED)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("readrate: %w", err)
	}
	return f.Name(), nil
}

// MinShard is the smallest shard Target measures: a smaller file is read
// before a rate can be told from the time it takes.
const MinShard = 256 << 20

// Target returns the file to measure a model's file system by: the largest
// shard of modelDir when it is at least MinShard and not sparse; otherwise a
// TempFile of size bytes, written for at most writeLimit once 64 MiB are in,
// in modelDir (in dir when modelDir is ""). remove deletes the file if
// Target wrote it, and does nothing otherwise.
func Target(modelDir, dir string, size int64, writeLimit time.Duration) (path string, remove func(), err error) {
	if modelDir != "" {
		shard, shardSize := LargestShard(modelDir)
		if shard == "" {
			return "", nil, fmt.Errorf("readrate: %s: no *.safetensors shard", modelDir)
		}
		if shardSize >= MinShard && !Sparse(shard) {
			return shard, func() {}, nil
		}
		dir = modelDir
	}
	tmp, err := TempFile(dir, size, writeLimit)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.Remove(tmp) }, nil
}
