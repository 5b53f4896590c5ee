package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// SplitRule selects the pre-tokenizer: which published split pattern the
// hand-written scanner reproduces.
type SplitRule uint8

const (
	// SplitKimi is the Kimi K2/K2.5/K3 pattern (§10.3): o200k's pattern
	// with a leading [\p{Han}]+ arm, Han removed from both letter classes and
	// a [\r\n]* tail on the punctuation arm.
	SplitKimi SplitRule = iota + 1
	// SplitO200K is tiktoken's o200k_base pattern.
	SplitO200K
	// SplitCL100K is tiktoken's cl100k_base pattern.
	SplitCL100K
)

// Published pattern strings, exactly as tiktoken and Moonshot write them.
const (
	PatternKimi   = `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	PatternO200K  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	PatternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// String returns the rule's name.
func (r SplitRule) String() string {
	switch r {
	case SplitKimi:
		return "kimi"
	case SplitO200K:
		return "o200k"
	case SplitCL100K:
		return "cl100k"
	}
	return fmt.Sprintf("SplitRule(%d)", uint8(r))
}

// Pattern returns the regular expression the rule implements.
func (r SplitRule) Pattern() string {
	switch r {
	case SplitKimi:
		return PatternKimi
	case SplitO200K:
		return PatternO200K
	case SplitCL100K:
		return PatternCL100K
	}
	return ""
}

func (r SplitRule) valid() bool { return r >= SplitKimi && r <= SplitCL100K }

// SplitRuleForPattern maps an exact pattern string to the rule that
// implements it. Only the three published patterns are supported: this
// package has no regular-expression engine.
func SplitRuleForPattern(pattern string) (SplitRule, error) {
	for _, r := range []SplitRule{SplitKimi, SplitO200K, SplitCL100K} {
		if pattern == r.Pattern() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("tokenizer: unsupported split pattern %.60q (only the Kimi, o200k and cl100k patterns are implemented)", pattern)
}

// Split returns the pieces the rule cuts text into, as the regex's finditer
// would over the whole text (no special-token handling). Text must be valid
// UTF-8.
func (r SplitRule) Split(text string) ([]string, error) {
	if !r.valid() {
		return nil, fmt.Errorf("tokenizer: invalid split rule %d", uint8(r))
	}
	if err := checkUTF8(text); err != nil {
		return nil, err
	}
	var out []string
	tab := classTab()
	for i := 0; i < len(text); {
		e := r.next(tab, text, i)
		out = append(out, text[i:e])
		i = e
	}
	return out, nil
}

// decodeAt returns the code point at s[i], its size and its class bits.
func decodeAt(tab []uint8, s string, i int) (rune, int, uint8) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), 1, tab[b]
	}
	// Most of a non-Latin text is 2- and 3-byte characters whose lead byte
	// allows every continuation byte; utf8.DecodeRuneInString is not
	// inlined, so decode those here and leave the rest to it.
	if i+1 < len(s) && b >= 0xc2 && b < 0xe0 {
		if c1 := s[i+1]; c1&0xc0 == 0x80 {
			c := rune(b&0x1f)<<6 | rune(c1&0x3f)
			return c, 2, classOf(tab, c)
		}
	} else if i+2 < len(s) && b > 0xe0 && b < 0xf0 && b != 0xed {
		if c1, c2 := s[i+1], s[i+2]; c1&0xc0 == 0x80 && c2&0xc0 == 0x80 {
			c := rune(b&0x0f)<<12 | rune(c1&0x3f)<<6 | rune(c2&0x3f)
			return c, 3, classOf(tab, c)
		}
	}
	c, sz := utf8.DecodeRuneInString(s[i:])
	return c, sz, classOf(tab, c)
}

// next returns the end of the piece that starts at s[i]; s ends where the
// current segment ends, so look-ahead never sees past it. The numbered steps
// follow §10.4.
func (r SplitRule) next(tab []uint8, s string, i int) int {
	c, sz, k := decodeAt(tab, s, i)
	if r == SplitCL100K {
		if c == '\'' {
			if e := contraction(s, i); e > i {
				return e
			}
		}
		if k&cL != 0 {
			return run(tab, s, i, cL)
		}
		if isPre(c, k) && i+sz < len(s) {
			if _, _, k2 := decodeAt(tab, s, i+sz); k2&cL != 0 {
				return run(tab, s, i+sz, cL)
			}
		}
	} else {
		up, lo := cUP, cLO
		if r == SplitKimi {
			if k&cHan != 0 {
				return run(tab, s, i, cHan)
			}
			up, lo = cUPK, cLOK
		}
		if e := letters(tab, s, i, c, sz, k, up, lo); e > i {
			return e
		}
	}
	if k&cN != 0 {
		e := i + sz
		for n := 1; n < 3 && e < len(s); n++ {
			_, sz2, k2 := decodeAt(tab, s, e)
			if k2&cN == 0 {
				break
			}
			e += sz2
		}
		return e
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*" (o200k: [\r\n/]*).
	body := -1
	if c == ' ' && i+1 < len(s) {
		if _, _, k2 := decodeAt(tab, s, i+1); isPun(k2) {
			body = i + 1
		}
	}
	if body < 0 && isPun(k) {
		body = i
	}
	if body >= 0 {
		e := body
		for e < len(s) {
			_, sz2, k2 := decodeAt(tab, s, e)
			if !isPun(k2) {
				break
			}
			e += sz2
		}
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || r == SplitO200K && s[e] == '/') {
			e++
		}
		return e
	}
	if k&cWS != 0 {
		// One scan of the white-space run serves "\s*[\r\n]+", "\s+(?!\S)"
		// and "\s+".
		w, last, lastNL, n := i, i, -1, 0
		for w < len(s) {
			c2, sz2, k2 := decodeAt(tab, s, w)
			if k2&cWS == 0 {
				break
			}
			if c2 == '\r' || c2 == '\n' {
				lastNL = w
			}
			last = w
			w += sz2
			n++
		}
		switch {
		case lastNL >= 0:
			return lastNL + 1
		case w == len(s):
			return w
		case n >= 2:
			return last
		default:
			return w
		}
	}
	// Unreachable: every code point is a letter, number, white space or
	// punctuation. Advance one code point so that the scan always ends.
	return i + sz
}

// isPre is [^\r\n\p{L}\p{N}].
func isPre(c rune, k uint8) bool { return k&(cL|cN) == 0 && c != '\r' && c != '\n' }

// isPun is [^\s\p{L}\p{N}].
func isPun(k uint8) bool { return k&(cWS|cL|cN) == 0 }

// run returns the end of the maximal run of code points with class bit bit
// starting at s[i].
func run(tab []uint8, s string, i int, bit uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if tab[b]&bit == 0 {
				return i
			}
			i++
			continue
		}
		_, sz, k := decodeAt(tab, s, i)
		if k&bit == 0 {
			return i
		}
		i += sz
	}
	return i
}

// letters implements the two letter alternatives of the o200k and Kimi
// patterns (§10.4 steps 2 and 3) with upper class up and lower class lo.
// It returns i when neither matches.
func letters(tab []uint8, s string, i int, c rune, sz int, k uint8, up, lo uint8) int {
	pre := isPre(c, k)
	// ASCII fast paths: a lower-case letter (the UP run from i is empty) or a
	// PRE code point before one (the UP run from i+1 is empty) both reduce to
	// the LO run.
	if c >= 'a' && c <= 'z' {
		return contractionAfter(s, run(tab, s, i+1, lo))
	}
	if pre && i+sz < len(s) && s[i+sz] >= 'a' && s[i+sz] <= 'z' {
		return contractionAfter(s, run(tab, s, i+sz+1, lo))
	}
	// upRun scans the maximal UP run from j and reports its end, the start
	// of the last code point in it that is also LO (-1 if none), and whether
	// the code point at the end of the run is LO.
	type upInfo struct {
		end, lastLO int
		nextLO      bool
	}
	upRun := func(j int) upInfo {
		u := upInfo{end: j, lastLO: -1}
		for u.end < len(s) {
			_, sz2, k2 := decodeAt(tab, s, u.end)
			if k2&up == 0 {
				u.nextLO = k2&lo != 0
				break
			}
			if k2&lo != 0 {
				u.lastLO = u.end
			}
			u.end += sz2
		}
		return u
	}
	// a: start j = i+sz (the optional leading code point taken); b: j = i.
	var a upInfo
	haveA := pre && i+sz < len(s)
	if haveA {
		a = upRun(i + sz)
	}
	// Step 2: [UP]*[LO]+ — backtrack the UP run to the last LO position.
	step2 := func(u upInfo) int {
		if u.nextLO {
			return contractionAfter(s, run(tab, s, u.end, lo))
		}
		if u.lastLO >= 0 {
			_, sz2, _ := decodeAt(tab, s, u.lastLO)
			return contractionAfter(s, u.lastLO+sz2)
		}
		return -1
	}
	if haveA {
		if e := step2(a); e >= 0 {
			return e
		}
	}
	// Start j = i can only match when c itself is UP or LO.
	if k&(up|lo) == 0 {
		if haveA && a.end > i+sz {
			return contractionAfter(s, run(tab, s, a.end, lo))
		}
		return i
	}
	b := upRun(i)
	if e := step2(b); e >= 0 {
		return e
	}
	// Step 3: [UP]+[LO]*.
	if haveA && a.end > i+sz {
		return contractionAfter(s, run(tab, s, a.end, lo))
	}
	if b.end > i {
		return contractionAfter(s, run(tab, s, b.end, lo))
	}
	return i
}

// contractionAfter extends e over (?i:'s|'t|'re|'ve|'m|'ll|'d) if it matches
// there.
func contractionAfter(s string, e int) int {
	if e < len(s) && s[e] == '\'' {
		if f := contraction(s, e); f > e {
			return f
		}
	}
	return e
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i] (which is an
// apostrophe) and returns its end, or i. Simple case folding makes 's also
// match U+017F LATIN SMALL LETTER LONG S; no other letter here has a
// non-ASCII fold partner.
func contraction(s string, i int) int {
	p := i + 1
	if p >= len(s) {
		return i
	}
	switch s[p] | 0x20 {
	case 's', 't', 'm', 'd':
		return p + 1
	case 'r', 'v':
		if p+1 < len(s) && s[p+1]|0x20 == 'e' {
			return p + 2
		}
	case 'l':
		if p+1 < len(s) && s[p+1]|0x20 == 'l' {
			return p + 2
		}
	}
	if s[p] == 0xC5 && p+1 < len(s) && s[p+1] == 0xBF {
		return p + 2
	}
	return i
}

// checkUTF8 validates text, reporting the first bad byte's offset.
func checkUTF8(text string) error {
	if utf8.ValidString(text) {
		return nil
	}
	for i := 0; i < len(text); {
		c, sz := utf8.DecodeRuneInString(text[i:])
		if c == utf8.RuneError && sz == 1 {
			return &InvalidUTF8Error{Offset: i}
		}
		i += sz
	}
	return &InvalidUTF8Error{Offset: len(text)}
}
