package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sysmem"
)

// TestDoctorCannotRun: a machine whose usable memory is below the model's floor plan is told so
// and doctor exits 1 before measuring the disk; one with room suggests floor when the K3-sized
// auto reserve does not fit.
func TestDoctorCannotRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m") // a copy: the probe goes beside it
	copyFiles(t, testkit.Models(t)[0], dir)
	small := func() (sysmem.Info, error) { return sysmem.Info{Available: 4096, Total: 1 << 20}, nil }
	var out, errb bytes.Buffer
	// doctorOn is the doctor command on a machine with the memory mem.
	doctorOn := func(mem func() (sysmem.Info, error), argv ...string) int {
		c := doctorCmd
		c.main = doctor(mem)
		return c.run(argv, &out, &errb)
	}
	code := doctorOn(small, dir)
	assert.Equal(t, exitRuntime, code, errb.String())
	assert.Contains(t, out.String(), "this machine cannot run the model")
	assert.NotContains(t, out.String(), "disk ", "refused before the disk is measured")

	// 8 MB with a 4 MB cgroup limit: auto refuses (its reserve is K3's), the tiny model's floor fits.
	mid := func() (sysmem.Info, error) {
		return sysmem.Info{Available: 8e6, Total: 16e6, Limit: 4e6, Used: 1e6, Cgroup: "/test"}, nil
	}
	out.Reset()
	errb.Reset()
	code = doctorOn(mid, dir, "--probe-mb", "64", "--seconds", "0.5")
	require.Equal(t, exitOK, code, errb.String())
	assert.Contains(t, out.String(), "cgroup /test memory limit 0.00 GB")
	assert.Contains(t, out.String(), "suggest  --preset floor")
	assert.Contains(t, out.String(), "next     k3 run "+dir+" --preset floor")
}

func FuzzParseSizes(f *testing.F) {
	for _, s := range []string{"8,16,32", "0.0001,0.001", "1,1", "2,1", "", ",", "1e3", "0", "1.5.2", "99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSizes("--sizes-gb", s)
		if err != nil {
			return
		}
		require.NotEmpty(t, v)
		for i, x := range v {
			require.Greater(t, x, 0.0)
			if i > 0 {
				require.Greater(t, x, v[i-1])
			}
		}
	})
}

// TestExecDoctor: doctor measures a temporary file and prints the next command; on a model it
// suggests a preset and estimates the I/O per token.
func TestExecDoctor(t *testing.T) {
	// A copy: the probe of a model with small shards is written beside its directory, and the
	// shared fixtures stay untouched.
	dir := filepath.Join(t.TempDir(), "m")
	copyFiles(t, testkit.Models(t)[0], dir)
	tmp := t.TempDir()
	r := execK3(t, "", "", "doctor", dir, "--probe-mb", "64", "--seconds", "1")
	require.Equal(t, 0, r.code, r.stderr)
	for _, s := range []string{"memory ", "O_DIRECT queue depth 1 ", "O_DIRECT queue depth 16 ", "buffered", "suggest  --preset", "estimate", "next     k3 run " + dir} {
		assert.Contains(t, r.stdout, s)
	}
	r = execK3(t, "", "", "doctor", "--dir", tmp, "--probe-mb", "64", "--seconds", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "MB/s")
	left, _ := filepath.Glob(filepath.Join(tmp, ".k3-doctor-*"))
	assert.Empty(t, left, "the probe file is removed")
	r = execK3(t, "", "", "doctor", dir, "--dir", tmp)
	assert.Equal(t, exitUsage, r.code)
}
