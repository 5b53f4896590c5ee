package cpulevels

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// models are the emulated CPUs: the kernels' AVX2 level and their pure-Go
// twins chosen at run time (not the purego build tag, which the root
// module's TestPureGoBuildDigests covers).
var models = []struct{ name, level string }{
	{"Haswell", "AVX2+FMA, no AVX-512"},
	{"Nehalem", "no AVX"},
}

func TestKernelsOnEmulatedCPUs(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the emulated CPUs are amd64 models")
	}
	if testing.Short() {
		t.Skip("-short: the emulated runs take minutes")
	}
	qemu, err := exec.LookPath("qemu-x86_64")
	if err != nil {
		t.Skip("qemu-x86_64 not found: install qemu-user to run the kernel tests on emulated CPUs without AVX-512 and without AVX")
	}
	pkgs := asmPackages(t)
	if len(pkgs) == 0 {
		t.Fatal("no package with assembly found: the listing is broken")
	}
	bin := t.TempDir()
	for _, p := range pkgs {
		t.Run(filepath.Base(p.dir), func(t *testing.T) {
			t.Parallel()
			exe := filepath.Join(bin, strings.ReplaceAll(p.path, "/", "_")+".test")
			build := exec.Command("go", "test", "-c", "-o", exe, p.path)
			// GOAMD64=v1: a binary built for v3 would require AVX2 itself.
			build.Env = append(os.Environ(), "GOAMD64=v1", "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go test -c %s: %v\n%s", p.path, err, out)
			}
			for _, m := range models {
				run := exec.Command(qemu, "-cpu", m.name, exe, "-test.count=1", "-test.short")
				run.Dir = p.dir // tests read testdata relative to their package
				out, err := run.CombinedOutput()
				if err != nil {
					t.Errorf("%s on %s (%s): %v\n%s", p.path, m.name, m.level, err, excerpt(out, 40))
				}
			}
		})
	}
}

type pkg struct{ path, dir string }

// asmPackages lists the module's packages that have assembly, so a new one is
// covered without touching this test.
func asmPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{if .SFiles}}{{.ImportPath}} {{.Dir}}{{end}}", "github.com/k3-project/k3/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pkgs = append(pkgs, pkg{f[0], f[1]})
	}
	return pkgs
}

// excerpt is what shows a failure: from a crash's signal line on (the
// instruction and the first frames), else the last n lines (the failing
// test's report); qemu's warnings about CPUID features TCG cannot emulate
// are dropped.
func excerpt(out []byte, n int) string {
	var keep []string
	for l := range strings.Lines(string(out)) {
		if !strings.HasPrefix(l, "qemu-x86_64: warning:") {
			keep = append(keep, l)
		}
	}
	if i := slices.IndexFunc(keep, func(l string) bool { return strings.HasPrefix(l, "SIG") }); i >= 0 {
		keep = keep[i:min(len(keep), i+n)]
	} else if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "")
}
