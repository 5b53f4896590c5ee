package testkit

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// ReadLoop benchmarks reading buf once per iteration with Sum, reporting
// len(buf) bytes per iteration through b.SetBytes, so its MB/s is directly
// comparable to a kernel benchmark that streams the same number of weight
// bytes.
func ReadLoop(b *testing.B, buf []byte) {
	ReadLoopWorkers(b, buf, 1)
}

// ReadLoopWorkers is ReadLoop with buf split into workers contiguous parts
// read concurrently, the yardstick for a kernel run on that many goroutines.
func ReadLoopWorkers(b *testing.B, buf []byte, workers int) {
	b.Helper()
	workers = max(1, min(workers, len(buf)/64))
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	var sink uint64
	for b.Loop() {
		sink ^= SumParallel(buf, workers)
	}
	b.StopTimer()
	runtime.KeepAlive(sink) // the sums must be computed
}

// Paired benchmarks kernel against a read of buf, alternating the two every
// iteration so that both see the same machine load (on a shared machine the
// load drifts between two separate benchmarks). Only kernel is timed for
// ns/op; b.SetBytes(len(buf)) makes its MB/s the kernel's bandwidth over buf.
// It also reports the read loop's bandwidth ("read-MB/s", read with
// SumParallel on workers goroutines) and the ratio of the two
// ("x-read" = kernel MB/s / read MB/s). kernel should stream buf itself (or
// as many bytes) on the same number of goroutines.
func Paired(b *testing.B, buf []byte, workers int, kernel func()) {
	b.Helper()
	workers = max(1, min(workers, len(buf)/64))
	b.SetBytes(int64(len(buf)))
	var read time.Duration
	var sink uint64
	b.ResetTimer()
	for range b.N {
		kernel()
		b.StopTimer()
		t := time.Now()
		sink ^= SumParallel(buf, workers)
		read += time.Since(t)
		b.StartTimer()
	}
	b.StopTimer()
	runtime.KeepAlive(sink)
	kernelNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	readNs := float64(read.Nanoseconds()) / float64(b.N)
	if kernelNs > 0 && readNs > 0 {
		b.ReportMetric(float64(len(buf))/readNs*1e3, "read-MB/s")
		b.ReportMetric(readNs/kernelNs, "x-read")
	}
}

// SumParallel reads buf split into workers contiguous parts on that many
// goroutines and returns the xor of the parts' Sums. The value only proves the
// bytes were read; it depends on the split.
func SumParallel(buf []byte, workers int) uint64 {
	if workers <= 1 {
		return Sum(buf)
	}
	parts := make([]uint64, workers)
	done := make(chan struct{}, workers)
	for i := range workers {
		lo, hi := i*len(buf)/workers, (i+1)*len(buf)/workers
		lo, hi = lo&^7, hi&^7
		if i == workers-1 {
			hi = len(buf)
		}
		go func() {
			parts[i] = Sum(buf[lo:hi])
			done <- struct{}{}
		}()
	}
	var s uint64
	for range workers {
		<-done
	}
	for _, p := range parts {
		s ^= p
	}
	return s
}

// Sum adds buf as little-endian uint64 words and returns the wrapped total.
//
// It reads four streams at once, one per quarter of buf, with eight
// independent accumulators. One sequential stream leaves memory bandwidth
// unused: on the development machine a single stream read about 8 GB/s from
// DRAM where four streams read about 11 GB/s, and a kernel that walks two
// weight rows at a time beat the one-stream loop. The yardstick must be the
// harder one, or ratios above 1 would mean nothing.
func Sum(buf []byte) uint64 {
	q := len(buf) / 4 &^ 63
	a, b, c, d := buf[:q], buf[q:2*q], buf[2*q:3*q], buf[3*q:4*q]
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	for i := 0; i < q; i += 64 {
		pa, pb := a[i:i+64:i+64], b[i:i+64:i+64]
		pc, pd := c[i:i+64:i+64], d[i:i+64:i+64]
		s0 += le(pa[0:]) + le(pa[8:]) + le(pa[16:]) + le(pa[24:])
		s1 += le(pa[32:]) + le(pa[40:]) + le(pa[48:]) + le(pa[56:])
		s2 += le(pb[0:]) + le(pb[8:]) + le(pb[16:]) + le(pb[24:])
		s3 += le(pb[32:]) + le(pb[40:]) + le(pb[48:]) + le(pb[56:])
		s4 += le(pc[0:]) + le(pc[8:]) + le(pc[16:]) + le(pc[24:])
		s5 += le(pc[32:]) + le(pc[40:]) + le(pc[48:]) + le(pc[56:])
		s6 += le(pd[0:]) + le(pd[8:]) + le(pd[16:]) + le(pd[24:])
		s7 += le(pd[32:]) + le(pd[40:]) + le(pd[48:]) + le(pd[56:])
	}
	rest := buf[4*q:]
	i := 0
	for ; i+8 <= len(rest); i += 8 {
		s0 += le(rest[i:])
	}
	for ; i < len(rest); i++ {
		s1 += uint64(rest[i])
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func le(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// Filled returns n bytes of xorshift noise. Every page is written, so reads
// hit real memory rather than the operating system's shared zero page, which
// would make an untouched buffer look impossibly fast. Reinterpreted as
// floats the bytes include NaN and Inf; benchmarks that care fill their own.
func Filled(n int) []byte {
	buf := make([]byte, n)
	s := uint64(0x9e3779b97f4a7c15)
	i := 0
	for ; i+8 <= n; i += 8 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		binary.LittleEndian.PutUint64(buf[i:], s)
	}
	for ; i < n; i++ {
		buf[i] = byte(i)
	}
	return buf
}
