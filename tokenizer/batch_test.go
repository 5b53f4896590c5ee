package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestChar3TableMatchesLookup: the dense table answers exactly what the rank
// table does for every 3-byte UTF-8 sequence (surrogate encodings included).
func TestChar3TableMatchesLookup(t *testing.T) {
	for _, fe := range loadFixtures(t).encs {
		r := fe.enc.Ranks()
		tab := newChar3Table(r)
		found := 0
		for cp := rune(0x800); cp <= 0xffff; cp++ {
			b := []byte{0xe0 | byte(cp>>12), 0x80 | byte(cp>>6)&0x3f, 0x80 | byte(cp)&0x3f}
			want, ok := r.lookup(string(b))
			if !ok {
				want = noRank
			} else {
				found++
			}
			sc := &scratch{char3: tab}
			if tab[cp] != want || sc.pairRank(r, "x"+string(b), 1, 4) != want {
				t.Fatalf("%s: U+%04X: table %d, pairRank %d, lookup %d", fe.name, cp, tab[cp], sc.pairRank(r, "x"+string(b), 1, 4), want)
			}
		}
		if found <= 500 {
			t.Fatalf("%s: %d 3-byte tokens, too few for the test to mean anything", fe.name, found)
		}
	}
}

// repetitive returns multilingual text whose words repeat, so the per-call
// memo fills and serves most pieces, and whose Han runs exercise the table.
func repetitive(n int) string {
	words := []string{"привет", "мир", " Мир", "你好世界", "漢字かな交じり文", "Ελληνικά", "hello", " world",
		"über", " 123", "!!", "\n", "  ", "가나다라", "ℌ𝔢𝔩𝔩𝔬", "don't", "عربي", "\t", "x" + strings.Repeat("y", 70)}
	var b strings.Builder
	s := uint32(7)
	for b.Len() < n {
		s = s*1664525 + 1013904223
		b.WriteString(words[s>>24%uint32(len(words))])
		if s&0x300 == 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// plainEncode is the memo-free reference: each piece merged with a fresh
// scratch that has neither the memo nor the 3-byte table.
func plainEncode(t *testing.T, e *Encoding, text string) []int {
	t.Helper()
	pieces, err := e.Split().Split(text)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, p := range pieces {
		ids = e.Ranks().bpe(ids, p, &scratch{})
	}
	return ids
}

// TestMemoAndTableAreExact: encoding with the memo and the table (which
// every long text uses) gives the ids of the plain merge, for fixture texts
// and for long repetitive multilingual text.
func TestMemoAndTableAreExact(t *testing.T) {
	long := repetitive(200_000)
	for _, fe := range loadFixtures(t).encs {
		// 200 kB is below the Kimi chunk size and has no 25,000-code-point
		// run, so the Kimi cuts leave the text whole.
		got, err := fe.enc.EncodeOrdinary(long)
		if err != nil {
			t.Fatal(err)
		}
		if want := plainEncode(t, fe.enc, long); !slices.Equal(got, want) {
			t.Fatalf("%s: the memo and tables change the ids", fe.name)
		}
	}
}

func TestEncodeBatchMatchesEncode(t *testing.T) {
	fs := loadFixtures(t)
	var texts []string
	for _, c := range fs.cases {
		if c.Category != "long" && len(c.Text) < 4096 {
			texts = append(texts, c.Text)
		}
	}
	texts = append(texts, repetitive(50_000), "", repetitive(3_000))
	for k, fe := range fs.encs {
		for _, mode := range []Mode{Mode(k % 2), AllowSpecial}[:1+k%2] {
			want := make([][]int, len(texts))
			for i, s := range texts {
				ids, err := fe.enc.Encode(s, mode)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = ids
			}
			for _, workers := range []int{0, 2, 5} {
				got, err := fe.enc.EncodeBatch(texts, mode, workers)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(texts) {
					t.Fatalf("%d results for %d texts", len(got), len(texts))
				}
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("%s mode=%d workers=%d text %d: %v, want %v", fe.name, mode, workers, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestEncodeBatchErrors(t *testing.T) {
	e := fixtureByName(t, "kimi-o200k").enc
	texts := []string{"fine", "also fine", "bad \xff here", "worse \xfe", "<|im_end|>"}
	for _, workers := range []int{1, 2, 4} {
		ids, err := e.EncodeBatch(texts, NoSpecial, workers)
		if ids != nil {
			t.Fatalf("ids %v returned with an error", ids)
		}
		var be *BatchError
		if !errors.As(err, &be) || be.Index != 2 {
			t.Fatalf("%v, want a *BatchError at index 2", err)
		}
		if !errors.Is(err, ErrInvalidUTF8) {
			t.Fatalf("%v, want ErrInvalidUTF8", err)
		}
		if n := strings.Count(err.Error(), "tokenizer:"); n != 1 {
			t.Fatalf("%q says tokenizer: %d times", err, n)
		}
	}
	_, err := e.EncodeBatch(texts[:2], Mode(9), 2)
	if err == nil || !strings.Contains(err.Error(), "invalid mode") {
		t.Fatalf("Mode(9): %v, want an invalid mode error", err)
	}
	if len(e.SpecialNames()) > 0 {
		_, err = e.EncodeBatch([]string{"a", "b" + e.SpecialNames()[0]}, RejectSpecial, 2)
		var be *BatchError
		if !errors.As(err, &be) || be.Index != 1 {
			t.Fatalf("%v, want a *BatchError at index 1", err)
		}
		if !errors.Is(err, ErrDisallowedSpecial) {
			t.Fatalf("%v, want ErrDisallowedSpecial", err)
		}
	}
	got, err := e.EncodeBatch(nil, NoSpecial, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("no texts gave %v", got)
	}
}

// TestMemoBounded: a text of distinct words (no piece repeats) encodes
// exactly, and the memo stops serving them and never grows past its bound;
// in a text whose words repeat, it serves most pieces.
func TestMemoBounded(t *testing.T) {
	fe := fixtureByName(t, "o200k")
	var b strings.Builder
	for i := uint32(1); b.Len() < 800_000; i++ {
		// Distinct lower-case words: each a multi-token piece " word".
		b.WriteByte(' ')
		for v := i * 2654435761; v != 0; v /= 26 {
			b.WriteByte(byte('a' + v%26))
		}
	}
	text := b.String()
	if !utf8.ValidString(text) {
		t.Fatal("the test text is not valid UTF-8")
	}
	sc := fe.enc.newScratch()
	got, err := fe.enc.encodeScratch(text, policy{}, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, plainEncode(t, fe.enc, text)) {
		t.Fatal("distinct words: the memo changes the ids")
	}
	if !sc.memoOff[0] {
		t.Fatal("a memo that never hits should stop serving")
	}
	if len(sc.memo) > 1<<memoMaxBits {
		t.Fatalf("memo of %d entries, bound %d", len(sc.memo), 1<<memoMaxBits)
	}

	text = repetitive(2_000_000)
	sc = fe.enc.newScratch()
	got, err = fe.enc.encodeScratch(text, policy{}, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, plainEncode(t, fe.enc, text)) {
		t.Fatal("repeated words: the memo changes the ids")
	}
	if sc.memo == nil {
		t.Fatal("no memo")
	}
	if sc.memoOff[0] || sc.memoOff[1] {
		t.Fatal("a memo that hits should keep serving")
	}
	if sc.memoHits[0] <= sc.memoMiss[0] {
		t.Fatalf("memo hits %d, misses %d: most pieces should hit", sc.memoHits[0], sc.memoMiss[0])
	}
}
