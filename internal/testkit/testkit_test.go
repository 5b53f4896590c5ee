package testkit

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b", "a", "notamodel"} {
		if err := os.MkdirAll(filepath.Join(dir, "models", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "notamodel" {
			if err := os.WriteFile(filepath.Join(dir, "models", name, "config.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Setenv(EnvVar, dir)
	if got := Dir(t); got != dir {
		t.Fatalf("Dir = %s, want %s", got, dir)
	}
	models := Models(t)
	want := []string{filepath.Join(dir, "models", "a"), filepath.Join(dir, "models", "b")}
	if fmt.Sprint(models) != fmt.Sprint(want) {
		t.Fatalf("Models = %v, want %v (sorted, only directories with a config.json)", models, want)
	}
}

// A missing fixture directory skips outside CI; under CI=true it must fail,
// which is what the child run checks (a failing subtest would fail this one).
func TestMissingFixturesSkipOrFail(t *testing.T) {
	if _, ok := ChildArg("K3_TESTKIT_CHILD"); ok {
		Dir(t)
		fmt.Println("NOTREACHED")
		return
	}
	t.Setenv(EnvVar, filepath.Join(t.TempDir(), "absent"))
	t.Setenv("CI", "")
	var skipped bool
	t.Run("outside CI", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Dir(t)
	})
	if !skipped {
		t.Fatal("a missing fixture directory did not skip outside CI")
	}
	if testing.Short() {
		return
	}
	t.Setenv("CI", "true")
	cmd := childCmd("TestMissingFixturesSkipOrFail", "K3_TESTKIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "NOTREACHED") || !strings.Contains(string(out), "CI=true") {
		t.Fatalf("under CI=true a missing fixture directory must fail the test; err=%v\n%s", err, out)
	}
}

func TestChild(t *testing.T) {
	if v, ok := ChildArg("K3_TESTKIT_ECHO"); ok {
		fmt.Printf("ECHO %s %d\n", v, PeakRSS())
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	line := ChildLine(t, RunChild(t, "TestChild", "K3_TESTKIT_ECHO", "hello"), "ECHO")
	var v string
	var rss int64
	if _, err := fmt.Sscanf(line, "ECHO %s %d", &v, &rss); err != nil {
		t.Fatal(err)
	}
	if v != "hello" {
		t.Fatalf("child got %q, want hello", v)
	}
	if runtime.GOOS == "linux" && rss <= 0 {
		t.Fatalf("child peak RSS %d on linux", rss)
	}
}

func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is linux's")
	}
	before := PeakRSS()
	buf := Filled(32 << 20) // every page written
	if after := PeakRSS(); before <= 0 || after < before+16<<20 {
		t.Fatalf("peak RSS %d then %d after touching %d bytes", before, after, len(buf))
	}
}

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

func TestDigest(t *testing.T) {
	a, b := []float32{1, 2}, []float32{3}
	if Digest(a, b) != Digest([]float32{1, 2, 3}) {
		t.Fatal("Digest depends on how the values are split into slices")
	}
	if Digest([]float32{0}) == Digest([]float32{float32(math.Copysign(0, -1))}) {
		t.Fatal("Digest does not tell −0 from +0")
	}
	// FNV-1a of no bytes is its offset basis.
	if got := Digest(); got != 0xcbf29ce484222325 {
		t.Fatalf("Digest() = %#x", got)
	}
}

func TestSameBits(t *testing.T) {
	nan1, nan2 := math.Float32frombits(0x7fc00000), math.Float32frombits(0x7fc00001)
	for _, c := range []struct {
		a, b        []float32
		same, ornan bool
	}{
		{[]float32{1, 2}, []float32{1, 2}, true, true},
		{[]float32{1, 2}, []float32{1}, false, false},
		{[]float32{0}, []float32{float32(math.Copysign(0, -1))}, false, false},
		{[]float32{nan1}, []float32{nan2}, false, true},
	} {
		if SameBits(c.a, c.b) != c.same {
			t.Errorf("SameBits(%v, %v) = %v", c.a, c.b, !c.same)
		}
		var failed bool
		t.Run("", func(t *testing.T) {
			ft := &fatalT{TB: t}
			func() {
				defer func() { recover() }()
				RequireSameBitsOrNaN(ft, "x", c.a, c.b)
			}()
			failed = ft.failed
		})
		if failed == c.ornan {
			t.Errorf("RequireSameBitsOrNaN(%v, %v) failed=%v", c.a, c.b, failed)
		}
	}
}

// fatalT records a Fatalf instead of ending the test, which the bit checks
// are made to do.
type fatalT struct {
	testing.TB
	failed bool
}

func (f *fatalT) Fatalf(string, ...any) { f.failed = true; panic(f) }
func (f *fatalT) Helper()               {}

func childCmd(test, env string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	return cmd
}
