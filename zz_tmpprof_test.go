package k3_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"testing"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestTmpWalkProf(t *testing.T) {
	runtime.MemProfileRate = 1
	out := os.Getenv("PROFOUT")
	for _, dir := range testkit.Models(t) {
		for _, n := range []int{2, 18} {
			m := openModel(t, dir, k3.WithThreads(1))
			bg := context.Background()
			ss := make([]*k3.Session, n)
			for i, p := range sharedPrompts(n, m.Config().Vocab) {
				ss[i] = m.NewSession()
				require.NoError(t, ss[i].Prefill(bg, p))
				require.NoError(t, ss[i].Step(bg, 1))
			}
			release := k3.HoldWalks(m)
			errs := make([]error, n)
			var wg sync.WaitGroup
			runtime.GC()
			runtime.GC()
			f, _ := os.Create(filepath.Join(out, fmt.Sprintf("%s-%d-before", filepath.Base(dir), n)))
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
			old := debug.SetGCPercent(-1)
			for i, s := range ss {
				wg.Go(func() { errs[i] = s.Step(bg, 1) })
			}
			release(n)
			wg.Wait()
			debug.SetGCPercent(old)
			runtime.GC()
			f, _ = os.Create(filepath.Join(out, fmt.Sprintf("%s-%d-after", filepath.Base(dir), n)))
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
}
