package testkit

import "testing"

// Named is what a checkpoint a test reads from offers: a tensor looked up by name.
type Named[T any] interface {
	Tensor(name string) (T, bool)
}

// ReadNamed looks the tensor name up in c and reads it with read (say c.ReadF32 or c.Read),
// failing the test when c has no such tensor or the read fails.
func ReadNamed[T, V any](tb testing.TB, c Named[T], name string, read func(T) (V, error)) V {
	tb.Helper()
	t, ok := c.Tensor(name)
	if !ok {
		tb.Fatalf("tensor %q missing", name)
	}
	v, err := read(t)
	if err != nil {
		tb.Fatalf("tensor %q: %v", name, err)
	}
	return v
}
