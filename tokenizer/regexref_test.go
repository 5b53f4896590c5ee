package tokenizer

import (
	"math/rand"
	"strings"
	"testing"
	"unicode"
)

// A tiny backtracking matcher over code points, used only as an independent
// reference for the hand-written scanners: the three patterns are written
// below as syntax trees, alternative by alternative, and evaluated with
// leftmost-first alternation and greedy quantifiers, the way fancy-regex
// evaluates them. Classes use unicode.Is directly, not the package's table.

type reNode interface {
	match(s []rune, i int, k func(int) bool) bool
}

type reClass func(rune) bool

func (c reClass) match(s []rune, i int, k func(int) bool) bool {
	return i < len(s) && c(s[i]) && k(i+1)
}

type reSeq []reNode

func (q reSeq) match(s []rune, i int, k func(int) bool) bool {
	if len(q) == 0 {
		return k(i)
	}
	return q[0].match(s, i, func(j int) bool { return q[1:].match(s, j, k) })
}

type reAlt []reNode

func (a reAlt) match(s []rune, i int, k func(int) bool) bool {
	for _, n := range a {
		if n.match(s, i, k) {
			return true
		}
	}
	return false
}

type reRep struct {
	n        reNode
	min, max int // max < 0: unbounded
}

func (r reRep) match(s []rune, i int, k func(int) bool) bool {
	return r.rep(s, i, 0, k)
}

func (r reRep) rep(s []rune, i, count int, k func(int) bool) bool {
	if r.max < 0 || count < r.max {
		if r.n.match(s, i, func(j int) bool { return j > i && r.rep(s, j, count+1, k) }) {
			return true
		}
	}
	return count >= r.min && k(i)
}

type reNotAhead struct{ n reNode }

func (l reNotAhead) match(s []rune, i int, k func(int) bool) bool {
	if l.n.match(s, i, func(int) bool { return true }) {
		return false
	}
	return k(i)
}

func in(ts ...*unicode.RangeTable) func(rune) bool {
	return func(c rune) bool {
		for _, t := range ts {
			if unicode.Is(t, c) {
				return true
			}
		}
		return false
	}
}

func refPatterns() map[SplitRule]reNode {
	L := in(unicode.L)
	N := in(unicode.N)
	S := in(unicode.White_Space)
	han := in(unicode.Han)
	upper := in(unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
	lower := in(unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
	not := func(f func(rune) bool) func(rune) bool { return func(c rune) bool { return !f(c) } }
	and := func(f, g func(rune) bool) func(rune) bool { return func(c rune) bool { return f(c) && g(c) } }
	lit := func(cs ...rune) reClass {
		return func(c rune) bool {
			for _, x := range cs {
				if c == x {
					return true
				}
			}
			return false
		}
	}
	crlf := lit('\r', '\n')
	pre := reClass(func(c rune) bool { return c != '\r' && c != '\n' && !L(c) && !N(c) })
	pun := reClass(func(c rune) bool { return !S(c) && !L(c) && !N(c) })
	// (?i:'s|'t|'re|'ve|'m|'ll|'d) with simple case folding.
	ap := lit('\'')
	contr := reAlt{
		reSeq{ap, lit('s', 'S', 'ſ')}, reSeq{ap, lit('t', 'T')}, reSeq{ap, lit('r', 'R'), lit('e', 'E')},
		reSeq{ap, lit('v', 'V'), lit('e', 'E')}, reSeq{ap, lit('m', 'M')}, reSeq{ap, lit('l', 'L'), lit('l', 'L')},
		reSeq{ap, lit('d', 'D')},
	}
	opt := func(n reNode) reNode { return reRep{n, 0, 1} }
	star := func(n reNode) reNode { return reRep{n, 0, -1} }
	plus := func(n reNode) reNode { return reRep{n, 1, -1} }
	tail := func(rule SplitRule) []reNode {
		punTail := lit('\r', '\n')
		if rule == SplitO200K {
			punTail = lit('\r', '\n', '/')
		}
		return []reNode{
			reRep{reClass(N), 1, 3},
			reSeq{opt(lit(' ')), plus(pun), star(punTail)},
			reSeq{star(reClass(S)), plus(crlf)},
			reSeq{plus(reClass(S)), reNotAhead{reClass(not(S))}},
			plus(reClass(S)),
		}
	}
	letters := func(up, lo func(rune) bool) []reNode {
		return []reNode{
			reSeq{opt(pre), star(reClass(up)), plus(reClass(lo)), opt(contr)},
			reSeq{opt(pre), plus(reClass(up)), star(reClass(lo)), opt(contr)},
		}
	}
	kimi := append(reAlt{plus(reClass(han))}, letters(and(upper, not(han)), and(lower, not(han)))...)
	kimi = append(kimi, tail(SplitKimi)...)
	o200k := append(reAlt{}, letters(upper, lower)...)
	o200k = append(o200k, tail(SplitO200K)...)
	cl100k := reAlt{contr, reSeq{opt(pre), plus(reClass(L))}}
	cl100k = append(cl100k, tail(SplitCL100K)...)
	return map[SplitRule]reNode{SplitKimi: kimi, SplitO200K: o200k, SplitCL100K: cl100k}
}

func refSplit(re reNode, text string) []string {
	s := []rune(text)
	var out []string
	for i := 0; i < len(s); {
		end := -1
		if !re.match(s, i, func(e int) bool { end = e; return true }) {
			end = i + 1 // cannot happen for these patterns
		}
		out = append(out, string(s[i:end]))
		i = end
	}
	return out
}

// TestSplitAgainstBacktracking compares every rule with the reference
// matcher on random strings over an alphabet chosen to hit every class
// boundary of §10.4.
func TestSplitAgainstBacktracking(t *testing.T) {
	alphabet := []rune("aBzZsStTrReEvVmMlLdD'’ſǅKʰ中々〇⺀あカー한\u0301\u20dd\u0903" +
		"0１١²½Ⅻ \t\n\r\v\f\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000" +
		"\x1c\x1f\ufeff\u200b😀!/.,&_-\x00")
	refs := refPatterns()
	rng := rand.New(rand.NewSource(5))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for iter := 0; iter < n; iter++ {
		rs := make([]rune, rng.Intn(14))
		for i := range rs {
			rs[i] = alphabet[rng.Intn(len(alphabet))]
		}
		text := string(rs)
		for _, rule := range []SplitRule{SplitKimi, SplitO200K, SplitCL100K} {
			got, err := rule.Split(text)
			if err != nil {
				t.Fatal(err)
			}
			want := refSplit(refs[rule], text)
			if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
				t.Fatalf("%v split of %q:\n got %q\nwant %q", rule, text, got, want)
			}
		}
	}
	// The worked examples through the reference too, so the table in
	// split_test.go is itself checked against the pattern.
	for _, ex := range []string{" 中文", "1〇〇〇", "x々y", "A中B", "한국ABC", "!\n/x", "\x1c\x1c a", "\u0301A!", "don't", "it'ſ", "HTMLParser", "'llama", "camelCase", "1's", "  hello", " 123", "a  \n  b"} {
		got, _ := SplitKimi.Split(ex)
		if want := refSplit(refs[SplitKimi], ex); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: %q vs reference %q", ex, got, want)
		}
	}
}

// FuzzSplitReference compares the scanners with the backtracking reference
// on arbitrary short valid UTF-8.
func FuzzSplitReference(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	refs := refPatterns()
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 64 {
			text = text[:64]
		}
		for _, rule := range []SplitRule{SplitKimi, SplitO200K, SplitCL100K} {
			got, err := rule.Split(text)
			if err != nil {
				return // invalid UTF-8: covered by FuzzEncode
			}
			want := refSplit(refs[rule], text)
			if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
				t.Fatalf("%v split of %q:\n got %q\nwant %q", rule, text, got, want)
			}
		}
	})
}
