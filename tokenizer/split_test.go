package tokenizer

import (
	"errors"
	"strings"
	"testing"
)

// TestKimiWorkedExamples is the table of §10.4 plus the fixture
// README's examples.
func TestKimiWorkedExamples(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{" 中文", []string{" ", "中文"}},
		{"1〇〇〇", []string{"1〇〇", "〇"}},
		{"x々y", []string{"x", "々", "y"}},
		{"A中B", []string{"A", "中", "B"}},
		{"한국ABC", []string{"한국", "ABC"}},
		{"!\n/x", []string{"!\n", "/x"}},
		{"\x1c\x1c a", []string{"\x1c\x1c", " a"}},
		{"\u0301A!", []string{"\u0301", "A", "!"}},
		{"don't", []string{"don't"}},
		{"it'ſ", []string{"it'ſ"}},
		{"HTMLParser", []string{"HTMLParser"}},
		{"'llama", []string{"'llama"}},
		{"camelCase", []string{"camel", "Case"}},
		{"1's", []string{"1", "'s"}},
		{"  hello", []string{" ", " hello"}},
		{" 123", []string{" ", "123"}},
		{"a  \n  b", []string{"a", "  \n", " ", " b"}},
		// README examples.
		{"x&&y", []string{"x", "&&", "y"}},
		{"ab中文cd", []string{"ab", "中文", "cd"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"a  1", []string{"a", " ", " ", "1"}},
		{"x  \n  y", []string{"x", "  \n", " ", " y"}},
		{"hello   [EOS]", []string{"hello", "  ", " [", "EOS", "]"}},
		{"", nil},
		{"   ", []string{"   "}},
		{"I'M", []string{"I'M"}},
		{"we'RE'll", []string{"we'RE", "'ll"}},
		{"x\u2019s", []string{"x", "\u2019s"}},
		{"1234567", []string{"123", "456", "7"}},
		{"a/\nb", []string{"a", "/\n", "b"}},
	}
	for _, c := range cases {
		got, err := SplitKimi.Split(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("Kimi split %q = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPatternDifferences pins the points where the three rules differ.
func TestPatternDifferences(t *testing.T) {
	cases := []struct {
		rule SplitRule
		in   string
		want []string
	}{
		{SplitO200K, "!\n/x", []string{"!\n/", "x"}},
		{SplitO200K, " 中文", []string{" 中文"}},
		{SplitO200K, "1〇〇〇", []string{"1〇〇", "〇"}},
		{SplitO200K, "A中B", []string{"A中", "B"}}, // [UP]* backs off to the last LO
		{SplitCL100K, "camelCase", []string{"camelCase"}},
		{SplitCL100K, "don't", []string{"don", "'t"}},
		{SplitCL100K, "1's", []string{"1", "'s"}},
		{SplitCL100K, "'ſ", []string{"'ſ"}},
		{SplitCL100K, "e\u0301", []string{"e", "\u0301"}},
		{SplitCL100K, " \u0301", []string{" \u0301"}},
	}
	for _, c := range cases {
		got, err := c.rule.Split(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%v split %q = %q, want %q", c.rule, c.in, got, c.want)
		}
	}
}

func TestSplitRuleForPattern(t *testing.T) {
	for _, r := range []SplitRule{SplitKimi, SplitO200K, SplitCL100K} {
		got, err := SplitRuleForPattern(r.Pattern())
		if err != nil || got != r {
			t.Errorf("%v: got %v, %v", r, got, err)
		}
	}
	if _, err := SplitRuleForPattern(`\w+`); err == nil {
		t.Error("unknown pattern accepted")
	}
}

func TestInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		in  string
		off int
	}{{"ab\xffcd", 2}, {"é\xc3", 2}, {"\xed\xa0\x80", 0}, {"ok \xe2\x82", 3}} {
		_, err := SplitKimi.Split(c.in)
		var e *InvalidUTF8Error
		if !errors.As(err, &e) || e.Offset != c.off || !errors.Is(err, ErrInvalidUTF8) {
			t.Errorf("%q: err %v, want offset %d", c.in, err, c.off)
		}
	}
}
