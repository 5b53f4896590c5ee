package trace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
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
type FileWriter struct {
	mu                sync.Mutex
	dir               string
	f                 *os.File
	w                 *bufio.Writer
	nLayers, nExperts int
	counts            map[[2]int32]int64
	n                 int64
	err               error
	closed            bool
}

// Create creates (or truncates) the trace files in dir, which must exist.
// nLayers and nExperts are the model's layer and expert counts recorded in
// the histogram; requests outside them are refused (recorded as an error).
func Create(dir string, nLayers, nExperts int) (*FileWriter, error) {
	if nLayers < 1 || nExperts < 1 || nExperts > 1<<20 {
		return nil, fmt.Errorf("trace: n_layers %d and n_experts %d: want ≥ 1 (experts ≤ 2^20)", nLayers, nExperts)
	}
	f, err := os.Create(filepath.Join(dir, TraceFile))
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return &FileWriter{dir: dir, f: f, w: bufio.NewWriterSize(f, 1<<16), nLayers: nLayers, nExperts: nExperts,
		counts: map[[2]int32]int64{}}, nil
}

// ExpertRequest appends one (layer, expert) record.
func (w *FileWriter) ExpertRequest(layer, expert int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.closed {
		return
	}
	if layer < 0 || layer >= w.nLayers || expert < 0 || expert >= w.nExperts {
		w.err = fmt.Errorf("trace: request (%d, %d) outside %d layers × %d experts", layer, expert, w.nLayers, w.nExperts)
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

// Close flushes the trace and writes the histogram. It returns the first
// error of the whole recording.
func (w *FileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	errs := []error{w.err}
	if err := w.w.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	}
	if err := w.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	}
	if err := os.WriteFile(filepath.Join(w.dir, HistFile), w.hist(), 0o644); err != nil {
		errs = append(errs, fmt.Errorf("trace: %w", err))
	}
	w.err = errors.Join(errs...)
	return w.err
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
	b := []byte(`{"n_layers":` + strconv.Itoa(w.nLayers) + `,"n_experts":` + strconv.Itoa(w.nExperts) + `,"counts":{`)
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
