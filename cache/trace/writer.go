package trace

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/k3-project/k3/atomicfile"
)

// File names inside a trace directory.
const (
	TraceFile = "expert_trace.bin"
	HistFile  = "expert_hist.json"
)

// FileWriter records demand requests to dir/expert_trace.bin as they come
// and writes dir/expert_hist.json on Close. It satisfies cache.Tracer and,
// through its no-op TrunkRead and LayerDone, a tracer interface that also
// receives trunk reads and layer timings. It is safe for concurrent use;
// a write error is kept and returned by Close (later requests are dropped).
//
// Until Close the trace is written under a temporary name beside its
// target; Close completes the header and renames it, then writes the
// histogram the same way. A recording that failed (a write error, a request
// outside the geometry) or was aborted leaves neither file behind.
type FileWriter struct {
	mu     sync.Mutex
	dir    string
	f      *atomicfile.File
	w      *bufio.Writer
	geo    Geometry
	counts map[[2]int32]int64
	n      int64
	err    error
	closed bool
}

// Create starts a trace in dir, which must exist, for a model of nLayers
// layers and nExperts experts: New with only those known.
func Create(dir string, nLayers, nExperts int) (*FileWriter, error) {
	return New(dir, Geometry{Layers: nLayers, Experts: nExperts})
}

// New starts a trace in dir, which must exist, recording g in its header;
// requests outside g's layers and experts are refused (recorded as an
// error). A previous trace in dir is replaced only when Close succeeds.
func New(dir string, g Geometry) (*FileWriter, error) {
	if err := g.Check(); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(filepath.Join(dir, TraceFile), 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	w := &FileWriter{dir: dir, f: f, w: bufio.NewWriterSize(f, 1<<16), geo: g, counts: map[[2]int32]int64{}}
	// The header's place; its content is known at Close.
	if _, err := w.w.Write(make([]byte, HeaderSize)); err != nil {
		f.Abort()
		return nil, fmt.Errorf("trace: %w", err)
	}
	return w, nil
}

// SetExpertBytes records one expert's size in the header, for a caller that
// learns it after recording started (zero: unknown).
func (w *FileWriter) SetExpertBytes(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	g := w.geo
	g.ExpertBytes = n
	if err := g.Check(); err != nil {
		w.err = cmp.Or(w.err, err)
		return
	}
	w.geo = g
}

// ExpertRequest appends one (layer, expert) record.
func (w *FileWriter) ExpertRequest(layer, expert int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.closed {
		return
	}
	if layer < 0 || layer >= w.geo.Layers || expert < 0 || expert >= w.geo.Experts {
		w.err = fmt.Errorf("trace: request (%d, %d) outside %d layers × %d experts", layer, expert, w.geo.Layers, w.geo.Experts)
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:4], uint32(layer))
	binary.LittleEndian.PutUint32(b[4:], uint32(expert))
	if _, err := w.w.Write(b[:]); err != nil {
		w.err = fmt.Errorf("trace: %w", err)
		return
	}
	w.counts[[2]int32{int32(layer), int32(expert)}]++
	w.n++
}

// TrunkRead is a no-op: the expert trace records expert requests only.
func (w *FileWriter) TrunkRead(layer int, off, n int64, d time.Duration) {}

// LayerDone is a no-op: the expert trace records expert requests only.
func (w *FileWriter) LayerDone(layer int, d time.Duration) {}

// Requests is the number of records written so far.
func (w *FileWriter) Requests() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Close completes the trace (header with the record count, fsync, rename)
// and writes the histogram. It returns the first error of the whole
// recording; after an error nothing is left at either name except what was
// there before.
func (w *FileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err == nil {
		w.err = w.commit()
	}
	if w.err != nil {
		w.f.Abort()
	}
	return w.err
}

// commit finishes the trace file, then the histogram.
func (w *FileWriter) commit() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	h, err := Header{Geometry: w.geo, Records: w.n}.AppendBinary(nil)
	if err != nil {
		return err
	}
	if _, err := w.f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := w.f.Commit(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(w.dir, HistFile), w.hist(), 0o644); err != nil {
		// A trace without its histogram is half a dump: take it back.
		os.Remove(w.f.Name())
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// Abort ends the recording without writing anything: the temporary trace
// is removed and a previous trace in the directory is left as it was.
func (w *FileWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.f.Abort()
	}
}

// hist renders expert_hist.json with keys in (layer, expert) order.
func (w *FileWriter) hist() []byte {
	keys := make([][2]int32, 0, len(w.counts))
	for k := range w.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	b := []byte(`{"n_layers":` + strconv.Itoa(w.geo.Layers) + `,"n_experts":` + strconv.Itoa(w.geo.Experts) + `,"counts":{`)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(k[0]), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(k[1]), 10)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, w.counts[k], 10)
	}
	return append(b, "}}\n"...)
}
