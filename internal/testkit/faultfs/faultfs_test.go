package faultfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func file(t *testing.T, n int) (string, []byte) {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := filepath.Join(t.TempDir(), "f.bin")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p, data
}

func TestFaults(t *testing.T) {
	p, data := file(t, 1000)
	x := New()
	f, err := x.Open(p)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 100)

	n, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, data[:100], buf[:n])

	x.Flip("f.bin", 10, 3)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, data[10]^8, buf[10])
	assert.Equal(t, data[11], buf[11])

	x.EIO("f.bin", 150, 10)
	_, err = f.ReadAt(buf, 100)
	assert.ErrorIs(t, err, syscall.EIO)
	_, err = f.ReadAt(buf, 160) // past the bad span
	assert.NoError(t, err)

	x.Short("f.bin", 420)
	n, err = f.ReadAt(buf, 400)
	assert.Equal(t, 20, n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, data[400:420], buf[:n])

	x.Shrink("f.bin", 500)
	st, err := f.Stat()
	require.NoError(t, err)
	assert.EqualValues(t, 500, st.Size())
	n, err = f.ReadAt(buf, 450)
	assert.Equal(t, 50, n)
	assert.ErrorIs(t, err, io.EOF)
	n, err = f.ReadAt(buf, 600)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF)

	assert.Equal(t, 7, x.Reads("f.bin"))
	x.Reset()
	n, err = f.ReadAt(buf, 900)
	require.NoError(t, err)
	assert.Equal(t, data[900:1000], buf[:n])
}

func TestWrap(t *testing.T) {
	data := bytes.Repeat([]byte{0xaa}, 64)
	x := New()
	x.Flip("mem", 5, 0)
	f := x.Wrap("mem", bytes.NewReader(data), int64(len(data)))
	buf := make([]byte, 64)
	_, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, byte(0xab), buf[5])
	st, err := f.Stat()
	require.NoError(t, err)
	assert.EqualValues(t, 64, st.Size())
	assert.NoError(t, f.Close())
}

func TestOpenRefusesNonRegular(t *testing.T) {
	_, err := New().Open(t.TempDir())
	assert.True(t, errors.Is(err, ErrNotRegular), "%v", err)
}
