package testkit

import (
	"errors"
	"testing"
)

type fakeCheckpoint map[string]int

func (c fakeCheckpoint) Tensor(name string) (int, bool) { v, ok := c[name]; return v, ok }

func TestReadNamed(t *testing.T) {
	c := fakeCheckpoint{"a": 3, "bad": -1}
	read := func(v int) (int, error) {
		if v < 0 {
			return 0, errors.New("unreadable")
		}
		return 2 * v, nil
	}
	if got := ReadNamed(t, c, "a", read); got != 6 {
		t.Errorf("ReadNamed(a) = %d, want 6", got)
	}
	for _, name := range []string{"missing", "bad"} {
		ft := &fatalTB{TB: t}
		func() {
			defer func() { _ = recover() }()
			ReadNamed(ft, c, name, read)
		}()
		if !ft.failed {
			t.Errorf("ReadNamed(%s) did not fail the test", name)
		}
	}
}

// fatalTB records a Fatalf and stops the caller, as testing's does, by panicking.
type fatalTB struct {
	testing.TB
	failed bool
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
