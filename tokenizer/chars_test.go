package tokenizer

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// charPieces returns pieces built to exercise bpeChars on the vocabulary of
// r: runs of non-ASCII tokens glued together (so that characters meet the
// neighbours the vocabulary merges them with), cut at random bytes (so
// that fragments of characters sit next to whole ones), with ASCII,
// characters the vocabulary lacks, 4-byte characters and invalid bytes
// mixed in.
func charPieces(r *Ranks, ct *charTable, rng *rand.Rand, count int) []string {
	// early holds the tokens that rank below a whole character they
	// contain: next to one, the character must not start complete.
	var multi, early []string
	for i := range r.Len() {
		b, _ := r.Token(i)
		if (len(b) > 1 && b[0] >= 0x80) || (len(b) > 2 && b[1] >= 0x80) {
			multi = append(multi, string(b))
		}
		for _, c := range string(b) {
			if n := utf8.RuneLen(c); c != utf8.RuneError && n > 1 && n < 4 && n < len(b) &&
				ct.own[c]>>ownShift == ownWhole && uint32(i) < ct.own[c]&ownMask {
				early = append(early, string(b))
				break
			}
		}
	}
	extra := []string{" ", "a", ",", "\n", "é", "中", "𝄞", "😀", "\x80", "\xff", "\xe4\xb8", "\xd0", "\xf0\x9f", "\u3000", "\uffff", "\u0800", "ـ"}
	pieces := make([]string, 0, count)
	var b strings.Builder
	for len(pieces) < count {
		b.Reset()
		size := 2 + rng.Intn(90)
		if rng.Intn(10) == 0 {
			size = 2 + rng.Intn(charsHeapThreshold)
		}
		for b.Len() < size {
			switch x := rng.Intn(10); {
			case x < 2 && len(early) > 0:
				b.WriteString(early[rng.Intn(len(early))])
			case x < 6:
				b.WriteString(multi[rng.Intn(len(multi))])
			case x < 7:
				t := multi[rng.Intn(len(multi))]
				b.WriteString(t[:rng.Intn(len(t)+1)])
			case x < 8:
				b.WriteString(extra[rng.Intn(len(extra))])
			case x < 9:
				b.WriteRune(rune(0x4e00 + rng.Intn(0x5200))) // CJK, often not a token
			default:
				b.WriteRune(rune(0x80 + rng.Intn(0x780))) // 2-byte scripts
			}
		}
		pieces = append(pieces, b.String())
	}
	return pieces
}

// TestBPECharsAgreement checks bpeChars against naiveBPE, the direct
// statement of §10.5, for every fixture encoding, and that the
// pieces took every branch of the shortcut: characters started whole
// and pending, pending ones of all three end shapes, and characters the
// test refused.
func TestBPECharsAgreement(t *testing.T) {
	for _, fe := range loadFixtures(t).encs {
		t.Run(fe.name, func(t *testing.T) {
			r := fe.enc.Ranks()
			if fe.enc.charTable() == nil {
				t.Fatal("no char table")
			}
			rng := rand.New(rand.NewSource(11))
			var st charStats
			sc := fe.enc.newScratch()
			sc.charStats = &st
			pieces := charPieces(r, fe.enc.charTable(), rng, 4000)
			pieces = append(pieces, strings.Repeat("中", 30), strings.Repeat("中国", 20), strings.Repeat("ab中", 15), "\u4e00\u4e00\u4e00\xe4")
			for _, p := range pieces {
				got := r.bpeChars(nil, p, sc)
				want := naiveBPE(r, p)
				if i, ok := equalInts(got, want); !ok {
					t.Fatalf("bpeChars of %q differs from naive at %d: %v, want %v", p, i, got, want)
				}
			}
			t.Logf("started: %d pending whole, %d pending [b0b1][b2], %d pending [b0][b1b2], %d of them eager, %d refused",
				st.starts[ownWhole], st.starts[ownLeft], st.starts[ownRight], st.eager, st.refused)
			for _, c := range []struct {
				n    int
				none string
			}{
				{st.starts[ownWhole] - st.eager, "no pending whole character"},
				{st.eager, "no character started complete"},
				{st.refused, "no character refused"},
				{st.starts[ownLeft] + st.starts[ownRight], "no pending character that stays split"},
			} {
				if c.n <= 0 {
					t.Fatal(c.none)
				}
			}
		})
	}
}

// TestCharTable checks the table against its definition for every 2- and
// 3-byte character: the shape and highest rank of the character's own run
// computed by naiveBPE on its bytes alone.
func TestCharTable(t *testing.T) {
	for _, fe := range loadFixtures(t).encs {
		t.Run(fe.name, func(t *testing.T) {
			r, ct := fe.enc.Ranks(), fe.enc.charTable()
			for cp := rune(0x80); cp < 0x10000; cp++ {
				if cp >= 0xd800 && cp < 0xe000 {
					continue // not encodable with utf8; covered by the byte rule
				}
				s := string(cp)
				parts := naiveBPE(r, s)
				var shape uint32
				switch {
				case len(parts) == 1:
					shape = ownWhole
				case len(parts) == len(s):
					shape = ownNone
				case len(parts) == 2 && utf8.RuneLen(cp) == 3:
					if b, _ := r.Token(parts[0]); len(b) == 2 {
						shape = ownLeft
					} else {
						shape = ownRight
					}
				default:
					t.Fatalf("U+%04X: %d parts", cp, len(parts))
				}
				own := ct.own[cp]
				if own>>ownShift != shape {
					t.Fatalf("U+%04X shape %d, want %d", cp, own>>ownShift, shape)
				}
				if shape != ownNone {
					if _, top := naiveMerge(r, s); own&ownMask != top {
						t.Fatalf("U+%04X M %d, want %d", cp, own&ownMask, top)
					}
				}
				if shape == ownWhole && cp%97 == 0 {
					// Eager: M ranks below every longer token holding s.
					ext := uint32(noRank)
					for i := range r.Len() {
						if b, _ := r.Token(i); len(b) > len(s) && strings.Contains(string(b), s) {
							ext = min(ext, uint32(i))
						}
					}
					if eager, want := own&ownEager != 0, own&ownMask < ext; eager != want {
						t.Fatalf("U+%04X eager %v, want %v", cp, eager, want)
					}
				}
			}
		})
	}
}

// TestBPECharsGuards runs bpeChars on small vocabularies built so that each
// of its three tests decides the result: without the test the shortcut
// would merge differently from naiveBPE.
func TestBPECharsGuards(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens []string // ranks 256.. in order
		piece  string
	}{
		// "a\xe4" outranks 中's own merges: a must take 中's lead byte.
		{"left edge", []string{"a\xe4", "\xb8\xad", "中"}, "a中"},
		// "\xada" outranks them: a takes 中's last byte.
		{"right edge", []string{"\xada", "\xe4\xb8", "中"}, "中a"},
		// "a中" outranks 中 itself, and "ba" ranks between them: 中 may
		// not start complete, or a would join it before b.
		{"eager", []string{"\xb8\xad", "a中", "ba", "中"}, "ba中"},
		// The same shapes for a 2-byte character.
		{"left edge, 2-byte", []string{"a\xd0", "ж"}, "aж"},
		{"eager, 2-byte", []string{"aя", "ba", "я"}, "baя"},
	} {
		t.Run(c.name, func(t *testing.T) {
			toks := singleBytes(len(c.tokens))
			for _, s := range c.tokens {
				toks = append(toks, []byte(s))
			}
			r, enc := o200kSplitEncoding(t, "guards", toks)
			want := naiveBPE(r, c.piece)
			if got := r.bpeChars(nil, c.piece, enc.newScratch()); !slices.Equal(got, want) {
				t.Fatalf("bpeChars(%q) = %v, want %v", c.piece, got, want)
			}
		})
	}
}

// FuzzBPEChars checks bpeChars against naiveBPE on vocabularies the fuzzer
// writes itself ('|'-separated tokens after the 256 bytes), so the
// argument for the shortcut is tried on orders of merges no real
// vocabulary has.
func FuzzBPEChars(f *testing.F) {
	f.Add("a\xe4|\xb8\xad|中", "a中")
	f.Add("\xada|\xe4\xb8|中", "中a")
	f.Add("\xb8\xad|a中|ba|中", "ba中")
	f.Add("a\xd0|ж|aж|ba", "baжж a")
	f.Add("\xe4\xb8|中国|国|\xe5\x9b|中|人", "中国人中国\xe4")
	f.Add("é|\xa9e|e\xcc|\xcc\x81", "éée\u0301")
	f.Fuzz(func(t *testing.T, vocab, piece string) {
		if len(piece) > 64 {
			return
		}
		toks := singleBytes(64)
		seen := map[string]bool{}
		for _, s := range strings.Split(vocab, "|") {
			if len(s) < 2 || len(s) > 12 || seen[s] || len(toks) >= 256+64 {
				continue
			}
			seen[s] = true
			toks = append(toks, []byte(s))
		}
		r, enc := o200kSplitEncoding(t, "fuzz", toks)
		// bpe: a piece that is a token is never merged (and bpeChars
		// is where any other piece with a non-ASCII byte goes).
		if got, want := r.bpe(nil, piece, enc.newScratch()), naiveBPE(r, piece); !slices.Equal(got, want) {
			t.Fatalf("bpe %v, naive %v", got, want)
		}
	})
}

// The character tables are built on the first piece outside ASCII, once.
func TestCharTableLazy(t *testing.T) {
	fe := fixtureByName(t, "o200k")
	enc, err := New(Spec{Name: "lazy", Ranks: fe.enc.Ranks(), Split: SplitO200K})
	if err != nil {
		t.Fatal(err)
	}
	_, err = enc.EncodeOrdinary("plain ASCII text, encoded without them")
	if err != nil {
		t.Fatal(err)
	}
	if enc.chars != nil {
		t.Fatal("ASCII text built the character tables")
	}
	_, err = enc.EncodeOrdinary("中文的文本")
	if err != nil {
		t.Fatal(err)
	}
	ct := enc.chars
	if ct == nil {
		t.Fatal("text outside ASCII did not build the character tables")
	}
	_, err = enc.EncodeOrdinary("再来一次")
	if err != nil {
		t.Fatal(err)
	}
	if enc.chars != ct {
		t.Fatal("the character tables were built again")
	}
}

// singleBytes returns the 256 one-byte tokens every vocabulary starts with,
// with room for extra more.
func singleBytes(extra int) [][]byte {
	toks := make([][]byte, 0, 256+extra)
	for b := range 256 {
		toks = append(toks, []byte{byte(b)})
	}
	return toks
}

// o200kSplitEncoding builds the ranks of toks and an encoding over them that
// splits as o200k does.
func o200kSplitEncoding(t *testing.T, name string, toks [][]byte) (*Ranks, *Encoding) {
	t.Helper()
	r, err := NewRanks(toks)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := New(Spec{Name: name, Ranks: r, Split: SplitO200K})
	if err != nil {
		t.Fatal(err)
	}
	return r, enc
}
