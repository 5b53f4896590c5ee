package main

import (
	"errors"
	"fmt"
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

// errHelp is returned by parse when -h or --help appears anywhere before "--": the command
// prints its help on stdout and exits 0.
var errHelp = errors.New("help requested")

// flagSpec says whether a flag takes a value.
type flagSpec map[string]bool

// args is a parsed command line: positional arguments and flag values (the last occurrence of a
// flag wins; at records where it was, for flags that override each other).
type args struct {
	pos  []string
	vals map[string]string
	at   map[string]int
	all  map[string][]string // every value of a flag, in order (for repeatable flags)
}

func (a *args) has(flag string) bool { _, ok := a.vals[flag]; return ok }

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
		takes, known := spec[name]
		if !known {
			if _, ok := spec["-"+name]; ok && !strings.HasPrefix(name, "--") {
				return nil, usagef(name, "unknown flag (did you mean -%s?)", name)
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
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, usagef(flag, "%q is not a decimal integer", s)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, usagef(flag, "%q is not a decimal integer", s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usagef(flag, "%s is outside [%d, %d]", s, lo, hi)
	}
	if v < int64(lo) || v > int64(hi) || (s[0] == '-' && lo >= 0) { // "-0" is not a count
		return 0, usagef(flag, "%s is outside [%d, %d]", s, lo, hi)
	}
	return int(v), nil
}

// parseIDList parses "1,2,3" strictly: every element a non-negative decimal integer, no empty
// elements, no spaces. (The C CLI turned "abc" into 32,768 zero ids, SPEC §12.2.)
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
			var ue *usageError
			if errors.As(err, &ue) {
				ue.msg = fmt.Sprintf("element %d: %s", i, ue.msg)
			}
			return nil, err
		}
		ids[i] = v
	}
	return ids, nil
}
