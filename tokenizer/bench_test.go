package tokenizer

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// benchTexts returns the fixture case texts, optionally without the "long"
// category, and their size.
func benchTexts(b *testing.B, skipLong bool) ([]string, int64) {
	return testkit.CorpusTexts(loadFixtures(b).cases, skipLong)
}

// BenchmarkEncode encodes the fixture corpus (every case, ordinary mode),
// paired with a plain read of the same number of bytes (x-read = encode
// MB/s / read MB/s). "all" uses every case; "nolong" leaves out the
// long-run category.
func BenchmarkEncode(b *testing.B) {
	fs := loadFixtures(b)
	for _, set := range []string{"all", "nolong"} {
		texts, size := benchTexts(b, set == "nolong")
		buf := testkit.Filled(int(size))
		for _, fe := range fs.encs {
			b.Run(set+"/"+fe.name, func(b *testing.B) {
				testkit.Paired(b, buf, 1, func() {
					for _, t := range texts {
						if _, err := fe.enc.EncodeOrdinary(t); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// BenchmarkVsTiktokenGo, which races github.com/pkoukk/tiktoken-go on the
// same corpus, lives in the crosscheck module (its own go.mod).

// BenchmarkLoadO200K parses the o200k rank file (199,998 ranks) from disk
// and reports the heap it retains.
func BenchmarkLoadO200K(b *testing.B) {
	path := testkit.Path(b, filepath.Join("tokenizer", "o200k_base.tiktoken"))
	var keep *Ranks
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := LoadRanks(path)
		if err != nil {
			b.Fatal(err)
		}
		keep = r
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "alloc-B/op")
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "retained-heap-B")
	runtime.KeepAlive(keep)
}

// BenchmarkLongPiece encodes 1 MiB of random lower-case letters: one piece
// with no split point.
func BenchmarkLongPiece(b *testing.B) {
	fe := fixtureByName(b, "kimi-o200k")
	buf := make([]byte, 1<<20)
	x := uint32(1)
	for i := range buf {
		x = x*1664525 + 1013904223
		buf[i] = byte('a' + (x>>24)%26)
	}
	s := string(buf)
	b.SetBytes(int64(len(s)))
	for i := 0; i < b.N; i++ {
		if _, err := fe.enc.EncodeOrdinary(s); err != nil {
			b.Fatal(err)
		}
	}
}
