package arena

import "testing"

// TestDisjoint checks that taken slices are consecutive, do not overlap and
// have capped capacity.
func TestDisjoint(t *testing.T) {
	var a Arena[float32]
	a.Reset(10)
	x, y, z := a.Take(3), a.Take(0), a.Take(7)
	if len(x) != 3 || cap(x) != 3 || len(y) != 0 || len(z) != 7 || cap(z) != 7 {
		t.Fatalf("lengths/caps: %d/%d %d %d/%d", len(x), cap(x), len(y), len(z), cap(z))
	}
	for i := range x {
		x[i] = 1
	}
	for i := range z {
		z[i] = 2
	}
	for i, v := range x {
		if v != 1 {
			t.Fatalf("x[%d] = %v after writing z", i, v)
		}
	}
	if &a.buf[3] != &z[0] {
		t.Fatal("z does not follow x")
	}
}

// TestReuse checks that a Reset no larger than before keeps the buffer (the
// no-allocation property the workspaces rely on) and restarts at offset 0.
func TestReuse(t *testing.T) {
	var a Arena[int]
	a.Reset(64)
	first := &a.Take(1)[0]
	allocs := testing.AllocsPerRun(50, func() {
		a.Reset(32)
		a.Take(16)
		a.Take(16)
	})
	if allocs != 0 {
		t.Fatalf("Reset/Take allocate %.1f times", allocs)
	}
	a.Reset(64)
	if &a.Take(1)[0] != first {
		t.Fatal("Reset moved the buffer although it was large enough")
	}
	a.Reset(65)
	if len(a.Take(65)) != 65 {
		t.Fatal("Reset did not grow the buffer")
	}
}

func TestOverTakePanics(t *testing.T) {
	var a Arena[float64]
	a.Reset(4)
	a.Take(3)
	defer func() {
		if recover() == nil {
			t.Fatal("Take beyond Reset did not panic")
		}
	}()
	a.Take(2)
}
