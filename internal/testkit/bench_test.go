package testkit

import (
	"encoding/binary"
	"testing"
)

// refSum is the obvious one-accumulator version of Sum: whole words up to
// the last multiple of 8 within the four 64-byte-aligned quarters and the
// rest, then the leftover bytes one by one.
func refSum(buf []byte) uint64 {
	var s uint64
	words := 4*(len(buf)/4&^63) + (len(buf)-4*(len(buf)/4&^63))&^7
	for i := 0; i < words; i += 8 {
		s += binary.LittleEndian.Uint64(buf[i:])
	}
	for i := words; i < len(buf); i++ {
		s += uint64(buf[i])
	}
	return s
}

func TestSum(t *testing.T) {
	buf := Filled(1000)
	for n := 0; n <= len(buf); n += 37 {
		if got, want := Sum(buf[:n]), refSum(buf[:n]); got != want {
			t.Fatalf("Sum(%d bytes) = %#x, want %#x", n, got, want)
		}
	}
}

func TestSumParallelReadsEverything(t *testing.T) {
	buf := Filled(4096 + 5)
	for workers := 1; workers <= 4; workers++ {
		before := SumParallel(buf, workers)
		buf[len(buf)-1] ^= 0xff // a byte in the last part must matter
		after := SumParallel(buf, workers)
		buf[len(buf)-1] ^= 0xff
		if before == after {
			t.Fatalf("workers=%d: flipping the last byte did not change the sum", workers)
		}
		buf[0] ^= 0xff
		if SumParallel(buf, workers) == before {
			t.Fatalf("workers=%d: flipping the first byte did not change the sum", workers)
		}
		buf[0] ^= 0xff
	}
}

func TestFilledTouchesEveryPage(t *testing.T) {
	buf := Filled(1 << 20)
	for p := 0; p < len(buf); p += 4096 {
		if binary.LittleEndian.Uint64(buf[p:]) == 0 {
			t.Fatalf("page at %d starts with zeros", p)
		}
	}
}

func BenchmarkReadLoop(b *testing.B) {
	buf := Filled(64 << 20)
	b.Run("g1", func(b *testing.B) { ReadLoop(b, buf) })
	b.Run("g2", func(b *testing.B) { ReadLoopWorkers(b, buf, 2) })
}

// BenchmarkPaired pits the read loop against itself: x-read should be ~1.
func BenchmarkPaired(b *testing.B) {
	buf := Filled(64 << 20)
	var sink uint64
	Paired(b, buf, 1, func() { sink ^= Sum(buf) })
	_ = sink
}
