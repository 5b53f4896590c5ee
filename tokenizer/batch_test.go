package tokenizer

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
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
		require.Greater(t, found, 500, "%s: too few 3-byte tokens for the test to mean anything", fe.name)
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
	require.NoError(t, err)
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
		require.NoError(t, err)
		require.Equal(t, plainEncode(t, fe.enc, long), got, fe.name)
	}
}

func TestEncodeBatchMatchesEncode(t *testing.T) {
	fs := loadFixtures(t)
	var texts []string
	for _, c := range fs.cases {
		if c.Category != "long" && len(c.text) < 4096 {
			texts = append(texts, c.text)
		}
	}
	texts = append(texts, repetitive(50_000), "", repetitive(3_000))
	for k, fe := range fs.encs {
		for _, mode := range []Mode{Mode(k % 2), AllowSpecial}[:1+k%2] {
			want := make([][]int, len(texts))
			for i, s := range texts {
				ids, err := fe.enc.Encode(s, mode)
				require.NoError(t, err)
				want[i] = ids
			}
			for _, workers := range []int{0, 2, 5} {
				got, err := fe.enc.EncodeBatch(texts, mode, workers)
				require.NoError(t, err)
				require.Len(t, got, len(texts))
				for i := range want {
					require.Equalf(t, want[i], got[i], "%s mode=%d workers=%d text %d", fe.name, mode, workers, i)
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
		require.Nil(t, ids)
		var be *BatchError
		require.ErrorAs(t, err, &be)
		require.Equal(t, 2, be.Index)
		require.ErrorIs(t, err, ErrInvalidUTF8)
		require.Equal(t, 1, strings.Count(err.Error(), "tokenizer:"), err.Error())
	}
	_, err := e.EncodeBatch(texts[:2], Mode(9), 2)
	require.ErrorContains(t, err, "invalid mode")
	if len(e.SpecialNames()) > 0 {
		_, err = e.EncodeBatch([]string{"a", "b" + e.SpecialNames()[0]}, RejectSpecial, 2)
		var be *BatchError
		require.ErrorAs(t, err, &be)
		require.Equal(t, 1, be.Index)
		require.True(t, errors.Is(err, ErrDisallowedSpecial))
	}
	got, err := e.EncodeBatch(nil, NoSpecial, 2)
	require.NoError(t, err)
	require.Empty(t, got)
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
	require.True(t, utf8.ValidString(text))
	sc := fe.enc.newScratch()
	got, err := fe.enc.encodeScratch(text, policy{}, sc)
	require.NoError(t, err)
	require.Equal(t, plainEncode(t, fe.enc, text), got)
	require.True(t, sc.memoOff[0], "a memo that never hits should stop serving")
	require.LessOrEqual(t, len(sc.memo), 1<<memoMaxBits)

	text = repetitive(2_000_000)
	sc = fe.enc.newScratch()
	got, err = fe.enc.encodeScratch(text, policy{}, sc)
	require.NoError(t, err)
	require.Equal(t, plainEncode(t, fe.enc, text), got)
	require.NotNil(t, sc.memo)
	require.False(t, sc.memoOff[0] || sc.memoOff[1], "a memo that hits should keep serving")
	require.Greater(t, sc.memoHits[0], sc.memoMiss[0])
}
