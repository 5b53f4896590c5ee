package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"strings"
)

// usageError is a command-line mistake; it maps to exit code 2 and names the flag.
type usageError struct {
	flag string
	msg  string
}

func (e *usageError) Error() string {
	if e.flag == "" {
		return e.msg
	}
	return e.flag + ": " + e.msg
}

func usagef(flag, format string, a ...any) error {
	return &usageError{flag: flag, msg: fmt.Sprintf(format, a...)}
}

// errHelp is returned by parseArgs when -h or --help appears anywhere before "--": the command
// prints its help on stdout and exits 0.
var errHelp = errors.New("help requested")

// flagSpec says whether a flag takes a value.
type flagSpec map[string]bool

// aliases are llama.cpp's spellings of the same flags (and the short forms people type); a
// command accepts an alias when it knows the flag it stands for, and records the value under
// that flag, so every later check and message names one spelling.
var aliases = map[string]string{
	"-p": "--prompt", "-f": "--prompt-file", "--file": "--prompt-file", "-n": "--gen", "--n-predict": "--gen",
	"--temp": "--temperature", "-t": "--threads", "-s": "--seed", "-c": "--ctx-size", "-r": "--stop",
	"--reverse-prompt": "--stop", "-i": "--interactive", "-q": "--quiet", "-v": "--verbose",
}

// names are the spellings a command accepts: its flags and their aliases.
func (s flagSpec) names() []string {
	var out []string
	for name := range s {
		out = append(out, name)
	}
	for a, c := range aliases {
		if _, ok := s[c]; ok {
			out = append(out, a)
		}
	}
	return out
}

// nearest returns the candidate closest to s by edit distance when it is close enough to be a
// plausible typo (at most a third of the longer name, and at least one edit allowed), else "".
// Ties go to the alphabetically first, so the suggestion does not depend on map order.
func nearest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(s, c)
		if d > max(2, max(len(s), len(c))/3) {
			continue
		}
		if bestD < 0 || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, over bytes (flag and command names
// are ASCII).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// merge returns the union of flag groups.
func merge(groups ...flagSpec) flagSpec {
	out := flagSpec{}
	for _, g := range groups {
		maps.Copy(out, g)
	}
	return out
}

// args is a parsed command line: positional arguments and flag values (the last occurrence of a
// flag wins; at records where it was, for flags that override each other).
type args struct {
	cmd  string // the subcommand, for messages
	pos  []string
	vals map[string]string
	at   map[string]int
	all  map[string][]string // every value of a flag, in order (for repeatable flags)
	// err is the first malformed value the typed getters met: a command reads all its flags
	// and checks once.
	err error
}

func (a *args) has(flag string) bool { _, ok := a.vals[flag]; return ok }

// usage reports a command-line mistake naming the subcommand and returns exit code 2.
func (a *args) usage(stderr io.Writer, err error) int { return usageFail(stderr, a.cmd, err) }

// check records err as a.err unless an earlier mistake is already recorded.
func (a *args) check(err error) {
	if a.err == nil {
		a.err = err
	}
}

// get returns the flag's value as parse reads it, or def when the flag is absent or a mistake
// was already recorded.
func get[T any](a *args, flag string, def T, parse func(flag, s string) (T, error)) T {
	s, ok := a.vals[flag]
	if !ok || a.err != nil {
		return def
	}
	v, err := parse(flag, s)
	a.check(err)
	return v
}

// int returns the flag's value in [lo, hi], or def as get does.
func (a *args) int(flag string, def, lo, hi int) int {
	return get(a, flag, def, func(flag, s string) (int, error) { return parseInt(flag, s, lo, hi) })
}

// decimal returns the flag's value as parseDecimal reads it, or def as get does.
func (a *args) decimal(flag string, def float64) float64 { return get(a, flag, def, parseDecimal) }

// gb returns the flag's value in bytes as parseGB reads it, or def as get does.
func (a *args) gb(flag string, def int64) int64 { return get(a, flag, def, parseGB) }

// last returns whichever of the flags appeared last on the command line, or "".
func (a *args) last(flags ...string) string {
	best, bestAt := "", -1
	for _, f := range flags {
		if i, ok := a.at[f]; ok && i > bestAt {
			best, bestAt = f, i
		}
	}
	return best
}

// isHelp reports whether an argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "--help" }

// parseArgs splits a command line into positional arguments and flag values, in argv order
// (later wins). Flags are written --name value or --name=value, the value never empty; a
// value-less flag listed with false must not be given a value. -h or --help anywhere before "--" (even where a value is
// expected) returns errHelp, so help is always one word away; a value that really is "--help" is
// written --flag=--help.
func parseArgs(argv []string, spec flagSpec) (*args, error) {
	for _, a := range argv {
		if a == "--" {
			break
		}
		if isHelp(a) {
			return nil, errHelp
		}
	}
	p := &args{vals: map[string]string{}, at: map[string]int{}}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			p.pos = append(p.pos, argv[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.pos = append(p.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if c, ok := aliases[name]; ok {
			if _, ok := spec[c]; ok {
				name = c
			}
		}
		takes, known := spec[name]
		if !known {
			if near := nearest(name, spec.names()); near != "" {
				return nil, usagef(name, "unknown flag (did you mean %s?)", near)
			}
			return nil, usagef(name, "unknown flag")
		}
		if !takes {
			if hasVal {
				return nil, usagef(name, "takes no value")
			}
			p.vals[name], p.at[name] = "", i
			continue
		}
		if !hasVal {
			if i+1 >= len(argv) {
				return nil, usagef(name, "needs a value")
			}
			i++
			val = argv[i]
		}
		if val == "" {
			return nil, usagef(name, "empty value") // no flag means anything by an empty path, list or name
		}
		p.vals[name], p.at[name] = val, i
		if p.all == nil {
			p.all = map[string][]string{}
		}
		p.all[name] = append(p.all[name], val)
	}
	return p, nil
}

// parseInt parses a decimal integer in [lo, hi] strictly: no spaces, no '+', no fractional or
// hexadecimal forms. A well-formed negative number below lo is reported as out of range, not as
// malformed.
func parseInt(flag, s string, lo, hi int) (int, error) {
	if s == "" {
		return 0, usagef(flag, "empty value")
	}
	if digits := strings.TrimPrefix(s, "-"); digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, usagef(flag, "%q is not a decimal integer", s)
	}
	// Digits that overflow are out of range like any other; "-0" is not a count.
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < int64(lo) || v > int64(hi) || (s[0] == '-' && lo >= 0) {
		return 0, usagef(flag, "%s is outside [%d, %d]", s, lo, hi)
	}
	return int(v), nil
}

// parseIDList parses "1,2,3" strictly: every element a non-negative decimal integer, no empty
// elements, no spaces. (The C CLI turned "abc" into 32,768 zero ids, §12.2.)
func parseIDList(flag, s string, maxLen int) ([]int, error) {
	if s == "" {
		return nil, usagef(flag, "empty id list")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxLen {
		return nil, usagef(flag, "%d ids, at most %d allowed", len(parts), maxLen)
	}
	ids := make([]int, len(parts))
	for i, p := range parts {
		v, err := parseInt(flag, p, 0, math.MaxInt32)
		if err != nil {
			if ue, ok := errors.AsType[*usageError](err); ok {
				ue.msg = fmt.Sprintf("element %d: %s", i, ue.msg)
			}
			return nil, err
		}
		ids[i] = v
	}
	return ids, nil
}

// parseSizes parses a strictly increasing list of positive decimal GB (at most 64 sizes).
func parseSizes(flag, s string) ([]float64, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 64 {
		return nil, usagef(flag, "%d sizes, at most 64", len(parts))
	}
	out := make([]float64, len(parts))
	for i, p := range parts {
		v, err := parseDecimal(flag, p)
		if err != nil {
			return nil, err
		}
		if v <= 0 || v > 1e6 {
			return nil, usagef(flag, "element %d: %s GB is outside (0, 1e6]", i, p)
		}
		if i > 0 && v <= out[i-1] {
			return nil, usagef(flag, "element %d: %s GB does not increase", i, p)
		}
		out[i] = v
	}
	return out, nil
}

// parseGB parses a positive, finite decimal number of gigabytes (10^9 bytes, as the C engine).
func parseGB(flag, s string) (int64, error) {
	v, err := parseDecimal(flag, s)
	if err != nil {
		return 0, err
	}
	if v <= 0 || v > 1e9 {
		return 0, usagef(flag, "%s GB is outside (0, 1e9]", s)
	}
	return int64(v * 1e9), nil
}

// parseDecimal accepts digits with at most one '.', nothing else (no sign, exponent, spaces,
// NaN or Inf).
func parseDecimal(flag, s string) (float64, error) {
	if s == "" || strings.Count(s, ".") > 1 || strings.Trim(s, "0123456789.") != "" || s == "." {
		return 0, usagef(flag, "%q is not a non-negative decimal number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, usagef(flag, "%q is out of range", s)
	}
	return v, nil
}
