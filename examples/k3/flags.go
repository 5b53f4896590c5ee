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

// flagSpec says whether a flag takes a value.
type flagSpec map[string]bool

// parseArgs splits args into positional arguments and flag values, in argv order (later wins).
// Flags are written --name value or --name=value; a value-less flag listed with false must not
// be given a value.
func parseArgs(args []string, spec flagSpec) (pos []string, vals map[string]string, err error) {
	vals = make(map[string]string)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = "--" + name
		takes, known := spec[name]
		if !known {
			return nil, nil, usagef(name, "unknown flag")
		}
		if !takes {
			if hasVal {
				return nil, nil, usagef(name, "takes no value")
			}
			vals[name] = ""
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, nil, usagef(name, "needs a value")
			}
			i++
			val = args[i]
		}
		vals[name] = val
	}
	return pos, vals, nil
}

// parseInt parses a decimal integer in [lo, hi] strictly: no spaces, no '+', no fractional or
// hexadecimal forms, and a '-' only where negative values are allowed (so "-0" is refused for a
// count).
func parseInt(flag, s string, lo, hi int) (int, error) {
	if s == "" {
		return 0, usagef(flag, "empty value")
	}
	for i, c := range s {
		if c < '0' || c > '9' {
			if i == 0 && c == '-' && len(s) > 1 && lo < 0 {
				continue
			}
			return 0, usagef(flag, "%q is not a decimal integer", s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usagef(flag, "%q is out of range", s)
	}
	if v < int64(lo) || v > int64(hi) {
		return 0, usagef(flag, "%d is outside [%d, %d]", v, lo, hi)
	}
	return int(v), nil
}

// parseIDList parses "1,2,3" strictly: every element a non-negative decimal integer, no empty
// elements. (The C CLI turned "abc" into 32,768 zero ids, SPEC §12.2.)
func parseIDList(flag, s string, maxLen int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef(flag, "empty id list")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxLen {
		return nil, usagef(flag, "%d ids, at most %d allowed", len(parts), maxLen)
	}
	ids := make([]int, len(parts))
	for i, p := range parts {
		v, err := parseInt(flag, strings.TrimSpace(p), 0, math.MaxInt32)
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
