package trunk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// source writes a file holding nl layers of two bf16 matrices each (rows×cols, deterministic
// values) at unaligned offsets and returns their descriptions.
func source(t testing.TB, nl, rows, cols int) (string, []Tensor) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weights.bin")
	var buf bytes.Buffer
	buf.Write(make([]byte, 100)) // an unaligned start, like a safetensors header
	r := rand.New(rand.NewPCG(1, 2))
	var ts []Tensor
	add := func(item int, name string, rows, cols int) {
		off := int64(buf.Len())
		for range rows * cols {
			v := math.Float32bits(float32(r.NormFloat64()))
			binary.Write(&buf, binary.LittleEndian, uint16(v>>16))
		}
		ts = append(ts, Tensor{Item: item, Name: name, File: path, Offset: off, Size: int64(rows * cols * 2),
			DType: safetensors.BF16, Rows: rows, Cols: cols})
		buf.Write(make([]byte, 6))
	}
	for l := range nl {
		add(l, fmt.Sprintf("layers.%d.a", l), rows, cols)
		add(l, fmt.Sprintf("layers.%d.b", l), rows/2, cols)
	}
	add(Head, "head", rows, cols)
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path, ts
}

// reference computes every matrix's MatVec from a resident copy.
func reference(t testing.TB, ts []Tensor, x []float32) map[string][]float32 {
	out := map[string][]float32{}
	for _, tt := range ts {
		b, err := os.ReadFile(tt.File)
		require.NoError(t, err)
		m, err := quant.NewBF16(tt.Rows, tt.Cols, b[tt.Offset:tt.Offset+tt.Size])
		require.NoError(t, err)
		d := make([]float32, tt.Rows)
		m.MatVec(d, x)
		out[tt.Name] = d
	}
	return out
}

func TestPlanFloorAndPinning(t *testing.T) {
	_, ts := source(t, 4, 64, 32)
	p, err := NewPlan(ts, 4, PlanConfig{Budget: 1 << 40, SideBytes: 1000})
	require.NoError(t, err)
	assert.Len(t, p.Pinned, 4)
	assert.True(t, p.HeadPinned)
	assert.Zero(t, p.Slots, "no ring when all is pinned")
	assert.Equal(t, int64(1000)+roundUp(64+window, 4096), p.Floor)

	_, err = NewPlan(ts, 4, PlanConfig{Budget: p.Floor - 1, SideBytes: 1000})
	require.ErrorIs(t, err, ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("minimum for this model is %d bytes", p.Floor))

	f, err := NewPlan(ts, 4, PlanConfig{Budget: p.Floor, SideBytes: 1000})
	require.NoError(t, err)
	assert.Equal(t, 1, f.Slots)
	assert.Empty(t, f.Pinned)
	assert.LessOrEqual(t, f.Total, f.Budget)

	// Largest first: the head (64 rows) and the layers tie at 96 rows… the layers are larger.
	mid, err := NewPlan(ts, 4, PlanConfig{Budget: p.Floor + 2*pinnedBytes(&ts[0]) + 2*pinnedBytes(&ts[1]) + 3*8192, SideBytes: 1000})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, mid.Pinned, "ties go to the lower layer")
	assert.LessOrEqual(t, mid.Total, mid.Budget)

	j, err := json.Marshal(mid)
	require.NoError(t, err)
	assert.Contains(t, string(j), `"pinned_layers":[0,1]`)
	assert.Contains(t, mid.String(), "2/4 layers")
}

// slowFile delays reads randomly and can fail one offset: it shakes out races between the
// read-ahead goroutine and the compute side.
type slowFile struct {
	storage.File
	r    *rand.Rand
	mu   sync.Mutex
	fail int64
}

func (s *slowFile) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	d := time.Duration(s.r.IntN(200)) * time.Microsecond
	s.mu.Unlock()
	time.Sleep(d)
	if s.fail >= 0 && off <= s.fail && s.fail < off+int64(len(p)) {
		return 0, syscall.EIO
	}
	return s.File.ReadAt(p, off)
}

// walkMatches walks every matrix of ts through s passes times, on workers workers, and requires
// each MatVec to equal want; more, when set, checks each matrix further after its MatVec.
func walkMatches(t *testing.T, s *Store, ts []Tensor, x []float32, want map[string][]float32, passes, workers int, more func(quant.Matrix, Tensor)) {
	t.Helper()
	for pass := range passes {
		for _, tt := range ts {
			m, ok := s.Matrix(tt.Name)
			require.True(t, ok)
			got := make([]float32, tt.Rows)
			quant.MatVecParallel(m, got, x, workers)
			require.NoError(t, s.Err())
			require.Equal(t, want[tt.Name], got, "pass %d %s, %d workers", pass, tt.Name, workers)
			if more != nil {
				more(m, tt)
			}
		}
	}
}

// TestRingNeverServesStaleBytes walks the pieces many times through rings of 1 … 8 slots with
// random read delays and checks every result against resident matrices: a slot in use or
// holding an upcoming piece being overwritten would change a value.
func TestRingNeverServesStaleBytes(t *testing.T) {
	_, ts := source(t, 5, 96, 40)
	x := make([]float32, 40)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	want := reference(t, ts, x)
	for _, ring := range []int{1, 2, 3, 8} {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("ring%d/w%d", ring, workers), func(t *testing.T) {
				floor, err := NewPlan(ts, 5, PlanConfig{Budget: 1 << 40})
				require.NoError(t, err)
				p, err := NewPlan(ts, 5, PlanConfig{Budget: int64(ring) * floor.MinSlot, Ring: ring, SlotBytes: 1})
				require.NoError(t, err)
				require.Equal(t, ring, p.Slots)
				open := func(path string) (storage.File, error) {
					f, err := storage.Open(path)
					return &slowFile{File: f, r: rand.New(rand.NewPCG(uint64(ring), 9)), fail: -1}, err
				}
				s, err := Open(p, ts, Options{Open: open, ChunkBytes: 4096})
				require.NoError(t, err)
				defer s.Close()
				walkMatches(t, s, ts, x, want, 5, workers, func(m quant.Matrix, tt Tensor) {
					// A sliced view and DecodeRow see the same bytes.
					sub := m.Slice(3, tt.Rows-1)
					g2 := make([]float32, tt.Rows-4)
					sub.MatVec(g2, x)
					require.Equal(t, want[tt.Name][3:tt.Rows-1], g2)
				})
				st := s.Stats()
				if ring == 1 {
					assert.Zero(t, st.Prefetches, "no read-ahead with one slot")
				} else {
					assert.Positive(t, st.Prefetches)
				}
			})
		}
	}
}

// TestSplitRing checks the floor of a trunk whose rows are small beside its one whole matrix:
// the plan cuts the one slot in two (read-ahead in the same bytes), a ring of 1 asked for keeps
// one slot, and walks through the split ring with random read delays give the resident
// results, the whole matrix read over both halves and every other piece read ahead.
func TestSplitRing(t *testing.T) {
	_, ts := source(t, 5, 512, 40)
	for i := range ts {
		if ts[i].Name == "layers.2.a" {
			ts[i].Whole = true // 40 960 bytes, read by rows in the layer's own order
		}
	}
	x := make([]float32, 40)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	want := reference(t, ts, x)
	all, err := NewPlan(ts, 5, PlanConfig{Budget: 1 << 40})
	require.NoError(t, err)
	p, err := NewPlan(ts, 5, PlanConfig{Budget: all.Floor})
	require.NoError(t, err)
	assert.Equal(t, [5]any{true, 2, int64(24576), int64(49152), true}, [5]any{p.Split, p.Slots, p.SlotBytes, p.RingBytes, p.ReadAhead})
	assert.Equal(t, all.Floor, p.Total, "the split costs no byte")
	assert.Contains(t, p.String(), "2 × 24.6 kB slots, read-ahead true (one slot's bytes, split")
	one, err := NewPlan(ts, 5, PlanConfig{Budget: all.Floor, Ring: 1})
	require.NoError(t, err)
	assert.Equal(t, [3]any{false, 1, false}, [3]any{one.Split, one.Slots, one.ReadAhead})

	for _, workers := range []int{1, 2} {
		open := func(path string) (storage.File, error) {
			f, err := storage.Open(path)
			return &slowFile{File: f, r: rand.New(rand.NewPCG(uint64(workers), 5)), fail: -1}, err
		}
		s, err := Open(p, ts, Options{Open: open, ChunkBytes: 4096})
		require.NoError(t, err)
		wide := 0
		for _, pc := range s.pieces {
			if pc.wide {
				wide++
				assert.Equal(t, "layers.2.a", pc.t.Name)
			}
		}
		require.Equal(t, 1, wide, "the whole matrix alone takes both slots")
		walkMatches(t, s, ts, x, want, 4, workers, nil)
		st := s.Stats()
		assert.Positive(t, st.PrefetchUsed, "pieces are read ahead and used")
		require.NoError(t, s.Close())
	}
}

func TestStreamReadFailure(t *testing.T) {
	_, ts := source(t, 3, 64, 32)
	p, err := NewPlan(ts, 3, PlanConfig{Budget: 3 * 12288, SlotBytes: 1})
	require.NoError(t, err)
	require.Greater(t, p.Slots, 1)
	target := ts[2] // layer 1's first matrix
	open := func(path string) (storage.File, error) {
		f, err := storage.Open(path)
		return &slowFile{File: f, r: rand.New(rand.NewPCG(1, 1)), fail: target.Offset + target.Size/2}, err
	}
	s, err := Open(p, ts, Options{Open: open})
	require.NoError(t, err)
	defer s.Close()
	x := make([]float32, 32)
	m, _ := s.Matrix(target.Name)
	got := make([]float32, target.Rows)
	m.MatVec(got, x)
	err = s.Err()
	var re *ReadError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, syscall.EIO)
	assert.Equal(t, 1, re.Item)
	nan := 0
	for _, v := range got {
		if math.IsNaN(float64(v)) {
			nan++
		}
	}
	assert.Positive(t, nan, "rows of an unread piece are NaN, never zeros or stale values")
	s.ClearErr()
	require.NoError(t, s.Err())
}

func TestOpenRefusesShortFile(t *testing.T) {
	path, ts := source(t, 2, 16, 16)
	require.NoError(t, os.Truncate(path, ts[len(ts)-1].Offset+10))
	p, err := NewPlan(ts, 2, PlanConfig{Budget: 1 << 30})
	require.NoError(t, err)
	_, err = Open(p, ts, Options{})
	require.ErrorIs(t, err, safetensors.ErrShortRead)
}

// packed writes a packed trunk of the source tensors and returns its directory.
func packed(t testing.TB, ts []Tensor, nl int) string {
	layers := make([][]SourceTensor, nl)
	for _, tt := range ts {
		if tt.Item < 0 {
			continue
		}
		layers[tt.Item] = append(layers[tt.Item], SourceTensor{Name: tt.Name, File: tt.File, Offset: tt.Offset,
			Size: tt.Size, DType: "BF16", Shape: []int64{int64(tt.Rows), int64(tt.Cols)}})
	}
	dir := t.TempDir()
	var last int64
	_, err := Pack(dir, layers, PackOptions{Progress: func(done, total int64) { last = done }})
	require.NoError(t, err)
	require.Positive(t, last)
	return dir
}

func TestPackGathersAndVerifies(t *testing.T) {
	_, ts := source(t, 3, 32, 16) // tensors separated by 6-byte gaps: gathered
	dir := packed(t, ts, 3)
	l, err := ReadLayout(dir, 3, Expect{})
	require.NoError(t, err)
	require.Len(t, l.Layers, 3)
	for i, r := range l.Layers {
		assert.Zero(t, r.FileOff%4096)
		assert.Zero(t, r.NBytes%4096)
		assert.Equal(t, "", r.Shard, "gathered runs name no shard")
		assert.Len(t, r.SHA256, 32, "layer %d", i)
	}
	// The packed bytes equal the sources'.
	bin, err := os.ReadFile(filepath.Join(dir, BinName))
	require.NoError(t, err)
	src, err := os.ReadFile(ts[0].File)
	require.NoError(t, err)
	for _, r := range l.Layers {
		for _, rt := range r.Tensors {
			for _, tt := range ts {
				if tt.Name == rt.Name {
					assert.Equal(t, src[tt.Offset:tt.Offset+tt.Size], bin[r.FileOff+rt.Off:r.FileOff+rt.Off+rt.NBytes])
				}
			}
		}
	}
}

// OpenPacked serves the packed tensors under their names, widens them from trunk.bin, reads
// through the opener it is given, and names a trunk.bin shorter than trunk.json says.
func TestOpenPacked(t *testing.T) {
	_, ts := source(t, 2, 32, 16)
	dir := packed(t, ts, 2)
	opened := 0
	open := func(path string) (storage.File, error) { opened++; return storage.Open(path) }
	p, err := OpenPacked(dir, 2, Expect{}, open)
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, 1, opened)
	assert.Len(t, p.Checksums(), 2)
	assert.Equal(t, filepath.Join(dir, LayoutName), p.LayoutPath())
	src, err := os.ReadFile(ts[0].File)
	require.NoError(t, err)
	for _, tt := range ts {
		pt, ok := p.Tensor(tt.Name)
		if tt.Item < 0 {
			require.False(t, ok, "%s is not a layer's", tt.Name)
			continue
		}
		require.True(t, ok, tt.Name)
		require.True(t, p.Holds(pt))
		got, err := p.ReadF32(pt)
		require.NoError(t, err)
		want := make([]float32, tt.Rows*tt.Cols)
		require.NoError(t, safetensors.WidenF32(want, src[tt.Offset:tt.Offset+tt.Size], safetensors.BF16))
		require.Equal(t, want, got, tt.Name)
	}
	_, ok := p.Tensor("layers.9.nothing")
	assert.False(t, ok)
	last, ok := p.Tensor(ts[len(ts)-2].Name)
	require.True(t, ok)
	require.NoError(t, os.Truncate(filepath.Join(dir, BinName), last.Offset+2))
	_, err = p.ReadF32(last)
	require.ErrorIs(t, err, safetensors.ErrShortRead)
}

func TestPackVerbatim(t *testing.T) {
	// One contiguous run per layer: copied verbatim with run_start and the shard name.
	path := filepath.Join(t.TempDir(), "s.safetensors")
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
	layers := [][]SourceTensor{{
		{Name: "layers.0.w", File: path, Offset: 1000, Size: 2048, DType: "BF16", Shape: []int64{32, 32}},
		{Name: "layers.0.n", File: path, Offset: 3048, Size: 64, DType: "F32", Shape: []int64{16}},
	}}
	dir := t.TempDir()
	l, err := Pack(dir, layers, PackOptions{})
	require.NoError(t, err)
	r := l.Layers[0]
	assert.Equal(t, "s.safetensors", r.Shard)
	assert.Equal(t, int64(1000), r.RunStart)
	assert.Equal(t, int64(2112), r.Unpadded)
	bin, err := os.ReadFile(filepath.Join(dir, BinName))
	require.NoError(t, err)
	assert.Equal(t, data[1000:3112], bin[:2112])
	assert.Len(t, bin, 4096)
	_, err = ReadLayout(dir, 1, Expect{})
	require.NoError(t, err)
}

func TestPackRefusesShortSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.bin")
	require.NoError(t, os.WriteFile(path, make([]byte, 100), 0o644))
	dir := t.TempDir()
	_, err := Pack(dir, [][]SourceTensor{{{Name: "layers.0.w", File: path, Offset: 0, Size: 200, DType: "U8", Shape: []int64{200}}}}, PackOptions{})
	require.ErrorIs(t, err, safetensors.ErrShortRead)
	_, err = os.Stat(filepath.Join(dir, LayoutName))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a failed pack leaves no trunk.json")
	_, err = ReadLayout(dir, 1, Expect{})
	assert.ErrorIs(t, err, ErrIncomplete)
}

// goodLayout reads the layout of the two-layer trunk packed in dir, requires ParseLayout to
// accept it, and returns it with the size of the trunk's bin file.
func goodLayout(t *testing.T, dir string) ([]byte, int64) {
	t.Helper()
	good, err := os.ReadFile(filepath.Join(dir, LayoutName))
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(dir, BinName))
	require.NoError(t, err)
	_, err = ParseLayout(good, st.Size(), 2, Expect{})
	require.NoError(t, err)
	return good, st.Size()
}

// TestLayoutViolations: every §8.3 rule refuses the trunk with ErrLayout.
func TestLayoutViolations(t *testing.T) {
	_, ts := source(t, 2, 32, 16)
	dir := packed(t, ts, 2)
	good, binSize := goodLayout(t, dir)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(good, &doc))
	layer := func(d map[string]any, i int) map[string]any { return d["layers"].([]any)[i].(map[string]any) }
	tensor := func(d map[string]any, i int, name string) map[string]any {
		return layer(d, i)["tensors"].(map[string]any)[name].(map[string]any)
	}
	cases := []struct {
		name   string
		mutate func(d map[string]any)
		raw    string
		want   string
	}{
		{name: "n_layers", mutate: func(d map[string]any) { d["n_layers"] = 3 }, want: "n_layers 3"},
		{name: "layers length", mutate: func(d map[string]any) { d["layers"] = d["layers"].([]any)[:1] }, want: "1 layers listed"},
		{name: "layer index", mutate: func(d map[string]any) { layer(d, 1)["layer"] = 0 }, want: "layers[1].layer is 0"},
		{name: "file_off alignment", mutate: func(d map[string]any) { layer(d, 1)["file_off"] = 4097 }, want: "multiples of 4096"},
		{name: "nbytes alignment", mutate: func(d map[string]any) { layer(d, 0)["nbytes"] = 100 }, want: "multiples of 4096"},
		{name: "overlapping runs", mutate: func(d map[string]any) { layer(d, 1)["file_off"] = 0 }, want: "overlaps"},
		{name: "run past trunk.bin", mutate: func(d map[string]any) { layer(d, 1)["file_off"] = 1 << 30 }, want: "ends past trunk.bin"},
		{name: "tensor past run", mutate: func(d map[string]any) { tensor(d, 0, "layers.0.a")["off"] = 1 << 20 }, want: "ends past the run"},
		{name: "tensor overlap", mutate: func(d map[string]any) { tensor(d, 0, "layers.0.b")["off"] = 8 }, want: "overlap"},
		{name: "dtype", mutate: func(d map[string]any) { tensor(d, 0, "layers.0.a")["dtype"] = "F64" }, want: "not one of"},
		{name: "I8R", mutate: func(d map[string]any) { tensor(d, 0, "layers.0.a")["dtype"] = "I8R" }, want: "draft trunk"},
		{name: "nbytes vs shape", mutate: func(d map[string]any) { tensor(d, 0, "layers.0.a")["shape"] = []int{32, 15} }, want: "needs"},
		{name: "foreign tensor", mutate: func(d map[string]any) {
			tt := layer(d, 0)["tensors"].(map[string]any)
			tt["layers.1.x"] = tt["layers.0.a"]
			delete(tt, "layers.0.a")
		}, want: "does not belong"},
		{name: "expert tensor", mutate: func(d map[string]any) {
			tt := layer(d, 0)["tensors"].(map[string]any)
			tt["layers.0.block_sparse_moe.experts.3.w1.weight_packed"] = tt["layers.0.a"]
			delete(tt, "layers.0.a")
		}, want: "routed expert"},
		{name: "missing field", mutate: func(d map[string]any) { delete(layer(d, 0), "file_off") }, want: "file_off is missing"},
		{name: "sha256", mutate: func(d map[string]any) { layer(d, 0)["sha256"] = "abc" }, want: "64 hex digits"},
		{name: "duplicate key", raw: strings.Replace(string(good), `"align":4096`, `"align":4096,"align":4096`, 1), want: "duplicate"},
		{name: "not json", raw: "{", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.raw)
			if c.mutate != nil {
				var d map[string]any
				require.NoError(t, json.Unmarshal(good, &d))
				c.mutate(d)
				var err error
				data, err = json.Marshal(d)
				require.NoError(t, err)
			}
			_, err := ParseLayout(data, binSize, 2, Expect{})
			require.ErrorIs(t, err, ErrLayout)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// A missing required tensor is the caller's rule.
	_, err := ParseLayout(good, binSize, 2, Expect{Layer: func(l int, names []string) error {
		return fmt.Errorf("needs layers.%d.c", l)
	}})
	require.ErrorIs(t, err, ErrLayout)
	assert.Contains(t, err.Error(), "needs layers.0.c")
	_ = doc
}

func FuzzParseLayout(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLayout(data, 1<<20, 2, Expect{})
		if err != nil {
			require.ErrorIs(t, err, ErrLayout)
			return
		}
		for _, r := range l.Runs() {
			require.False(t, r.FileOff%4096 != 0 || r.NBytes%4096 != 0 || r.FileOff+r.NBytes > 1<<20, "accepted a bad run %+v", r)
		}
	})
}

// TestStatsFigures: the derived figures of Stats that reports print.
func TestStatsFigures(t *testing.T) {
	s := Stats{BytesRead: 300e6, HeadBytes: 100e6, EmbedBytes: 5, DeviceSeconds: 2, WaitSeconds: 0.5}
	assert.Equal(t, int64(400e6+5), s.TotalBytes())
	assert.Equal(t, 200.0, s.StreamMBs())
	assert.Equal(t, 0.75, s.Overlap())
	assert.Zero(t, Stats{BytesRead: 1}.StreamMBs(), "no device time yet")
}
