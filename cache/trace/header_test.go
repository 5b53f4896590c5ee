package trace

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/stretchr/testify/require"
)

var tinyGeo = Geometry{Layers: 13, Experts: 8, TopK: 2, MoELayers: 12, ExpertBytes: 6528}

// writeTrace records reqs under g in a fresh directory and returns the trace's path.
func writeTrace(t *testing.T, g Geometry, reqs []Request) string {
	t.Helper()
	dir := t.TempDir()
	w, err := New(dir, g)
	require.NoError(t, err)
	for _, r := range reqs {
		w.ExpertRequest(int(r.Layer), int(r.Expert))
	}
	require.NoError(t, w.Close())
	return filepath.Join(dir, TraceFile)
}

func TestHeaderRoundTrip(t *testing.T) {
	reqs := []Request{{1, 0}, {12, 7}, {1, 0}}
	p := writeTrace(t, tinyGeo, reqs)
	tr, err := Open(p)
	require.NoError(t, err)
	defer tr.Close()
	h, ok := tr.Header()
	require.True(t, ok)
	require.False(t, tr.Headerless())
	require.Equal(t, Header{Geometry: tinyGeo, Records: 3}, h)
	require.Equal(t, int64(24), h.RequestsPerToken())
	require.Equal(t, 3, tr.Len())
	got, err := tr.Requests()
	require.NoError(t, err)
	require.Equal(t, reqs, got)
	// Pieces from any record on.
	part := make([]Request, 5)
	n, err := tr.ReadRequests(part, 1)
	require.NoError(t, err)
	require.Equal(t, reqs[1:], part[:n])
	_, err = tr.ReadRequests(part, 4)
	require.Error(t, err)

	require.NoError(t, h.CheckExpertBytes(6528))
	require.ErrorIs(t, h.CheckExpertBytes(6529), ErrExpertBytes)
	require.NoError(t, Geometry{Layers: 1, Experts: 1}.CheckExpertBytes(5), "unknown size: anything goes")

	// The expert size can be learnt after recording starts.
	dir := t.TempDir()
	w, err := Create(dir, 13, 8)
	require.NoError(t, err)
	w.SetExpertBytes(99)
	require.NoError(t, w.Close())
	tr2, err := Open(filepath.Join(dir, TraceFile))
	require.NoError(t, err)
	defer tr2.Close()
	h2, _ := tr2.Header()
	require.Equal(t, Header{Geometry: Geometry{Layers: 13, Experts: 8, ExpertBytes: 99}}, h2)
}

// TestTruncatedRefused: every cut of a trace with a header is refused by
// name, a cut inside the records as ErrTruncated; trailing bytes as ErrSize.
func TestTruncatedRefused(t *testing.T) {
	p := writeTrace(t, tinyGeo, []Request{{1, 0}, {2, 1}, {3, 2}, {4, 3}})
	full, err := os.ReadFile(p)
	require.NoError(t, err)
	for cut := 1; cut < len(full); cut++ {
		q := filepath.Join(t.TempDir(), "cut.bin")
		require.NoError(t, os.WriteFile(q, full[:cut], 0o644))
		_, err := Open(q)
		require.Error(t, err, "cut at %d accepted", cut)
		if cut >= 4 {
			require.ErrorIs(t, err, ErrTruncated, "cut at %d", cut)
		}
	}
	q := filepath.Join(t.TempDir(), "long.bin")
	require.NoError(t, os.WriteFile(q, append(full, make([]byte, 8)...), 0o644))
	_, err = Open(q)
	require.ErrorIs(t, err, ErrSize)
}

func TestHeaderDamageRefused(t *testing.T) {
	p := writeTrace(t, tinyGeo, []Request{{1, 0}})
	full, err := os.ReadFile(p)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		off  int
		val  uint32
	}{
		{"version", 4, 2}, {"checksum", 40, 0}, {"reserved", 44, 1}, {"layers", 8, 0},
	} {
		b := append([]byte{}, full...)
		binary.LittleEndian.PutUint32(b[c.off:], c.val)
		_, err := ParseHeader(b)
		require.ErrorIs(t, err, ErrHeader, c.name)
		q := filepath.Join(t.TempDir(), "bad.bin")
		require.NoError(t, os.WriteFile(q, b, 0o644))
		_, err = Open(q)
		require.ErrorIs(t, err, ErrHeader, c.name)
	}
	// A record outside the header's geometry (the body is not checksummed,
	// the geometry bounds it).
	b := append([]byte{}, full...)
	binary.LittleEndian.PutUint32(b[HeaderSize:], 13)
	q := filepath.Join(t.TempDir(), "rec.bin")
	require.NoError(t, os.WriteFile(q, b, 0o644))
	tr, err := Open(q)
	require.NoError(t, err)
	defer tr.Close()
	_, err = tr.Requests()
	require.ErrorIs(t, err, ErrRecord)
	require.ErrorContains(t, err, "outside 13 layers × 8 experts")

	for _, g := range []Geometry{{Layers: 1, Experts: 0}, {Layers: 2, Experts: 2, TopK: 3}, {Layers: 2, Experts: 2, MoELayers: 3},
		{Layers: 2, Experts: 2, ExpertBytes: -1}, {Layers: 2, Experts: 1<<20 + 1}} {
		_, err := Header{Geometry: g}.AppendBinary(nil)
		require.ErrorIs(t, err, ErrHeader, "%+v", g)
		_, err = New(t.TempDir(), g)
		require.ErrorIs(t, err, ErrHeader, "%+v", g)
	}
	_, err = Header{Geometry: tinyGeo, Records: -1}.AppendBinary(nil)
	require.ErrorIs(t, err, ErrHeader)
}

// TestHeaderlessStillRead: the original form is read and reported as such.
func TestHeaderlessStillRead(t *testing.T) {
	reqs := []Request{{1, 5}, {92, 895}}
	p := filepath.Join(t.TempDir(), "old.bin")
	require.NoError(t, os.WriteFile(p, Encode(reqs), 0o644))
	tr, err := Open(p)
	require.NoError(t, err)
	defer tr.Close()
	require.True(t, tr.Headerless())
	_, ok := tr.Header()
	require.False(t, ok)
	got, err := tr.Requests()
	require.NoError(t, err)
	require.Equal(t, reqs, got)
	// An empty file is an empty headerless trace.
	e := filepath.Join(t.TempDir(), "empty.bin")
	require.NoError(t, os.WriteFile(e, nil, 0o644))
	tr2, err := Open(e)
	require.NoError(t, err)
	require.Zero(t, tr2.Len())
	tr2.Close()
}

// TestOpenRefusesNonRegular: a directory (or a FIFO) is refused before
// anything could block on it.
func TestOpenRefusesNonRegular(t *testing.T) {
	_, err := Open(t.TempDir())
	require.ErrorIs(t, err, regular.ErrNotRegular)
}

func TestAbortLeavesPrevious(t *testing.T) {
	p := writeTrace(t, tinyGeo, []Request{{1, 0}})
	dir := filepath.Dir(p)
	before, err := os.ReadFile(p)
	require.NoError(t, err)
	w, err := New(dir, tinyGeo)
	require.NoError(t, err)
	w.ExpertRequest(2, 2)
	w.Abort()
	w.Abort()
	w.ExpertRequest(2, 2) // after Abort: dropped
	after, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, before, after)
	es, _ := os.ReadDir(dir)
	require.Len(t, es, 2, "the previous trace and histogram only")
}

// FuzzParseHeader: whatever the bytes, a header is either refused with a
// named error or describes a possible geometry and re-encodes to the same
// 48 bytes.
func FuzzParseHeader(f *testing.F) {
	good, _ := Header{Geometry: tinyGeo, Records: 3}.AppendBinary(nil)
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte("K3XT"))
	k3, _ := Header{Geometry: Geometry{Layers: 93, Experts: 896, TopK: 16, MoELayers: 92, ExpertBytes: 17_547_264}, Records: 100_096}.AppendBinary(nil)
	f.Add(k3)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			require.Equal(t, Header{}, h)
			return
		}
		require.NoError(t, h.Check())
		require.GreaterOrEqual(t, h.Records, int64(0))
		again, err := h.AppendBinary(nil)
		require.NoError(t, err)
		require.Equal(t, b[:HeaderSize], again, "ParseHeader accepted bytes AppendBinary would not write")
	})
}
