package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, 93, 896)
	require.NoError(t, err)
	reqs := []Request{{1, 5}, {92, 895}, {1, 5}, {3, 0}, {1, 5}}
	for _, r := range reqs {
		w.ExpertRequest(int(r.Layer), int(r.Expert))
	}
	w.TrunkRead(2, 0, 100, 0) // no-ops of the wider tracer interface
	w.LayerDone(2, 0)
	require.Equal(t, int64(5), w.Requests())
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())

	raw, err := os.ReadFile(filepath.Join(dir, TraceFile))
	require.NoError(t, err)
	require.Len(t, raw, HeaderSize+8*len(reqs))
	require.Equal(t, "K3XT", string(raw[:4]))
	raw = raw[HeaderSize:]
	require.Equal(t, []byte{1, 0, 0, 0, 5, 0, 0, 0, 92, 0, 0, 0, 0x7f, 3, 0, 0}, raw[:16])
	require.Equal(t, Encode(reqs), raw)

	tr, err := Open(filepath.Join(dir, TraceFile))
	require.NoError(t, err)
	defer tr.Close()
	require.Equal(t, 5, tr.Len())
	got, err := tr.Requests()
	require.NoError(t, err)
	require.Equal(t, reqs, got)

	hist, err := os.ReadFile(filepath.Join(dir, HistFile))
	require.NoError(t, err)
	require.Equal(t, `{"n_layers":93,"n_experts":896,"counts":{"1,5":3,"3,0":1,"92,895":1}}`+"\n", string(hist))
	var h struct {
		NLayers  int              `json:"n_layers"`
		NExperts int              `json:"n_experts"`
		Counts   map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal(hist, &h))
	require.Equal(t, 3, len(h.Counts))
}

func TestWriterRefusesOutOfRange(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, 4, 8)
	require.NoError(t, err)
	w.ExpertRequest(1, 2)
	w.ExpertRequest(4, 0)
	w.ExpertRequest(1, 3) // dropped after the error
	err = w.Close()
	require.ErrorContains(t, err, "(4, 0) outside 4 layers × 8 experts")
	// A failed recording leaves nothing that a replay would accept.
	require.NoFileExists(t, filepath.Join(dir, TraceFile))
	require.NoFileExists(t, filepath.Join(dir, HistFile))
	es, _ := os.ReadDir(dir)
	require.Empty(t, es, "no temporary left behind")
	_, err = Create(filepath.Join(dir, "missing"), 4, 8)
	require.Error(t, err)
	_, err = Create(dir, 0, 8)
	require.Error(t, err)
}

func TestReaderErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "odd.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 12), 0o644))
	_, err := Open(p)
	require.ErrorIs(t, err, ErrSize)
	_, err = Decode([]byte{1, 2, 3})
	require.ErrorIs(t, err, ErrSize)
	_, err = Decode([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	require.ErrorIs(t, err, ErrRecord)
	_, err = Decode([]byte{1, 0, 0, 0, 0, 0, 0x10, 0})
	require.ErrorIs(t, err, ErrRecord) // expert 2^20
	_, err = Open(filepath.Join(dir, "absent.bin"))
	require.Error(t, err)
	got, err := Decode(nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestRealTraceShape(t *testing.T) {
	tr, err := Open(testkit.Path(t, "expert_trace.bin"))
	require.NoError(t, err)
	defer tr.Close()
	require.Equal(t, 100_096, tr.Len())
	reqs, err := tr.Requests()
	require.NoError(t, err)
	lo, hi, maxE := int32(1<<30), int32(-1), int32(-1)
	for _, r := range reqs {
		lo, hi, maxE = min(lo, r.Layer), max(hi, r.Layer), max(maxE, r.Expert)
	}
	require.Equal(t, [3]int32{1, 92, 895}, [3]int32{lo, hi, maxE})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 5, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 5, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0x0f, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := Decode(b)
		if err != nil {
			require.False(t, len(b)%8 == 0 && reqs != nil, "requests returned with an error")
			return
		}
		require.Zero(t, len(b)%8, "a partial record accepted")
		require.Len(t, reqs, len(b)/8)
		require.Equal(t, string(b), string(Encode(reqs)), "Encode(Decode(b)) != b")
		for _, r := range reqs {
			require.False(t, r.Layer < 0 || r.Expert < 0 || r.Expert >= MaxExpert, "invalid record %+v accepted", r)
		}
	})
}

// TestFullDiskLeavesNoTrace: a dump that cannot be written whole (here a
// file size limit, which write(2) reports as a full disk would be, part-way)
// fails at Close and leaves the previous dump in place and no temporary.
func TestFullDiskLeavesNoTrace(t *testing.T) {
	if dir, ok := testkit.FullDiskChild("TRACE_FULL"); ok {
		w, err := New(dir, tinyGeo)
		if err != nil {
			fmt.Println("RESULT new", err)
			return
		}
		for i := range 100_000 {
			w.ExpertRequest(1+i%12, i%8)
		}
		fmt.Println("RESULT close", w.Close())
		return
	}
	p := writeTrace(t, tinyGeo, []Request{{1, 0}})
	dir := filepath.Dir(p)
	before, err := os.ReadFile(p)
	require.NoError(t, err)
	line := testkit.RunFullDisk(t, "TestFullDiskLeavesNoTrace", "TRACE_FULL", dir)
	require.True(t, strings.HasPrefix(line, "RESULT close trace: "), line)
	require.Contains(t, line, "file too large")
	after, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, before, after, "the previous trace is untouched")
	es, _ := os.ReadDir(dir)
	require.Len(t, es, 2, "no temporary left: %v", es)
}
