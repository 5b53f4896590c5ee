package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("Dir skips under -short")
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	t.Setenv("K3_TESTKIT_CKPT", dir)
	var writes, afters int
	c := Checkpoint{Env: "K3_TESTKIT_CKPT", Geometry: "g", Seed: 7,
		Synthesize: func(d, geometry string, seed int64) error {
			writes++
			if writes == 1 && d != dir || geometry != "g" || seed != 7 {
				t.Errorf("Synthesize(%s, %s, %d)", d, geometry, seed)
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(d, "config.json"), []byte("{}"), 0o644)
		},
		After: func(testing.TB, string) { afters++ },
	}
	for range 2 {
		if got := c.Dir(t); got != dir {
			t.Fatalf("Dir = %s, want %s", got, dir)
		}
	}
	if writes != 1 || afters != 1 {
		t.Fatalf("synthesized %d times, After ran %d times; want once each", writes, afters)
	}
	t.Setenv("K3_TESTKIT_CKPT", "")
	c.TempDir = true
	if got := c.Dir(t); filepath.Base(got) != "g" || writes != 2 {
		t.Fatalf("TempDir: Dir = %s after %d writes", got, writes)
	}
	var skipped bool
	t.Run("unset", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Perf(nil).Dir(t)
	})
	if os.Getenv(PerfEnv) == "" && !skipped {
		t.Fatal("without the variable the checkpoint did not skip")
	}
}

func TestSynth(t *testing.T) {
	calls := 0
	dir := Synth(t, func(d, geometry string, seed int64) error {
		calls++
		if filepath.Base(d) != "tiny" || geometry != "tiny" || seed != 7 {
			t.Errorf("synthesize(%s, %s, %d)", d, geometry, seed)
		}
		return os.Mkdir(d, 0o755)
	}, "tiny", 7)
	if calls != 1 {
		t.Fatalf("%d calls of the synthesizer, want 1", calls)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s: %v", dir, err)
	}
}
