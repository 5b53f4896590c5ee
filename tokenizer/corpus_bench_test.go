package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpusEnv names a directory of UTF-8 *.txt files of real text, one file per
// language or script (for example the translated messages of installed
// packages, see the README). BenchmarkCorpus skips without it.
const corpusEnv = "K3_TOKENIZER_CORPUS"

// corpusFiles returns the corpus texts by file name (without .txt), sorted.
func corpusFiles(b testing.TB) ([]string, map[string]string) {
	dir := os.Getenv(corpusEnv)
	if dir == "" {
		b.Skipf("set %s to a directory of *.txt files of real text", corpusEnv)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("%s=%s: no *.txt files (%v)", corpusEnv, dir, err)
	}
	texts := map[string]string{}
	var names []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".txt")
		texts[name] = string(data)
		names = append(names, name)
	}
	slices.Sort(names)
	return names, texts
}

// BenchmarkCorpus encodes each corpus file whole (ordinary mode) with every
// fixture encoding on one goroutine. Besides MB/s of wall time it reports
// MB per second of the thread's CPU time ("cpu-MB/s", Linux), the per-core
// figure that survives other jobs on a shared machine.
//
//	K3_TOKENIZER_CORPUS=<dir> go test -run '^$' -bench Corpus ./tokenizer
func BenchmarkCorpus(b *testing.B) {
	names, texts := corpusFiles(b)
	for _, fe := range loadFixtures(b).encs {
		for _, name := range names {
			text := texts[name]
			b.Run(fe.name+"/"+name, func(b *testing.B) {
				lockThread()
				defer unlockThread()
				b.SetBytes(int64(len(text)))
				c0, ok := threadCPU()
				for b.Loop() {
					if _, err := fe.enc.EncodeOrdinary(text); err != nil {
						b.Fatal(err)
					}
				}
				if c1, _ := threadCPU(); ok && c1 > c0 {
					b.ReportMetric(float64(len(text))*float64(b.N)/1e6/(c1-c0).Seconds(), "cpu-MB/s")
				}
			})
		}
	}
}

// BenchmarkCorpusBatch encodes the whole corpus, cut into texts of about
// 4 kB at line ends, with EncodeBatch on 1 and 2 workers (kimi-o200k,
// ordinary mode); compare the MB/s of the two for the scaling with cores.
func BenchmarkCorpusBatch(b *testing.B) {
	names, files := corpusFiles(b)
	var texts []string
	var size int64
	for _, name := range names {
		text := files[name]
		for len(text) > 0 {
			n := min(len(text), 4096)
			if i := strings.IndexByte(text[n:], '\n'); i >= 0 {
				n += i + 1
			} else {
				n = len(text)
			}
			texts = append(texts, text[:n])
			size += int64(n)
			text = text[n:]
		}
	}
	fe := fixtureByName(b, "kimi-o200k")
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if _, err := fe.enc.EncodeBatch(texts, NoSpecial, workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCorpusAgreement encodes each corpus file (K3_TOKENIZER_CORPUS, as for
// BenchmarkCorpus; skipped without it) with every fixture encoding and
// checks the ids against the plain merge: no memo, no character tables,
// every piece merged byte by byte.
//
//	K3_TOKENIZER_CORPUS=<dir> go test -run CorpusAgreement ./tokenizer
func TestCorpusAgreement(t *testing.T) {
	if os.Getenv(corpusEnv) == "" {
		t.Skipf("set %s to a directory of *.txt files of real text", corpusEnv)
	}
	names, texts := corpusFiles(t)
	for _, fe := range loadFixtures(t).encs {
		for _, name := range names {
			got, err := fe.enc.EncodeOrdinary(texts[name])
			if err != nil {
				t.Fatal(err)
			}
			want := plainEncode(t, fe.enc, texts[name])
			if i, ok := equalInts(got, want); !ok || len(got) != len(want) {
				t.Fatalf("%s/%s: ids differ from the plain merge at %d (%d and %d ids)", fe.name, name, i, len(got), len(want))
			}
		}
	}
}
