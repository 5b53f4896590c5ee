package trunk

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/storage"
)

// TestStreamedPieceRecheckedEveryRead: a streamed piece rewritten in place between two of its
// reads — even by a writer that keeps the file's size, inode and times — fails its next read
// with an error naming the file and matching storage.ErrChanged; the bytes
// restored, it reads again.
func TestStreamedPieceRecheckedEveryRead(t *testing.T) {
	path, ts := source(t, 3, 64, 32)
	// One slot: no read-ahead, so every walk reads each streamed piece after the test's write.
	p, err := NewPlan(ts, 3, PlanConfig{Budget: 3 * 12288, SlotBytes: 1, Ring: 1})
	require.NoError(t, err)
	s, err := Open(p, ts, Options{})
	require.NoError(t, err)
	defer s.Close()
	target := ts[2] // layer 1's first matrix: streamed, read once per walk
	x := make([]float32, target.Cols)
	got := make([]float32, target.Rows)
	walk := func() error {
		s.ClearErr()
		for _, tt := range ts {
			m, ok := s.Matrix(tt.Name)
			require.True(t, ok)
			m.MatVec(make([]float32, tt.Rows), x)
			if tt.Name == target.Name {
				m.MatVec(got, x)
			}
		}
		return s.Err()
	}
	require.NoError(t, walk())
	require.NoError(t, walk())
	st := s.Stats()
	require.Positive(t, st.RecheckBytes)

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], target.Offset+5)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{b[0] ^ 0x40}, target.Offset+5)
	require.NoError(t, err)
	err = walk()
	require.ErrorIs(t, err, storage.ErrChanged)
	var re *ReadError
	require.ErrorAs(t, err, &re)
	require.Equal(t, path, re.File)

	_, err = f.WriteAt(b[:], target.Offset+5)
	require.NoError(t, err)
	require.NoError(t, walk(), "the first read's bytes again")
}
