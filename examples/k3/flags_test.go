package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseIDList: the id-list parser never panics, and whatever it accepts re-serialises to the
// canonical form of its input (so nothing was silently dropped, truncated or defaulted).
func FuzzParseIDList(f *testing.F) {
	for _, s := range []string{"1,2,3", "abc", "1,,2", "", " 7 , 8", "1, 2", "-1", "99999999999999999999", "0", "1,2,", "+3", "0x1f", "1e3", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := parseIDList("--ids", s, 64)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) || ue.flag != "--ids" {
				t.Fatalf("%q: error %v is not a usage error naming --ids", s, err)
			}
			return
		}
		parts := strings.Split(s, ",")
		if len(parts) != len(ids) {
			t.Fatalf("%q: %d ids from %d elements", s, len(ids), len(parts))
		}
		for i, p := range parts {
			if ids[i] < 0 || strings.TrimLeft(p, "0") != strings.TrimLeft(strconv.Itoa(ids[i]), "0") {
				t.Fatalf("%q: element %q parsed as %d", s, p, ids[i])
			}
		}
	})
}

// FuzzParseInt: accepted values are within bounds and spelled as plain decimals.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"8", "x", "-1", "4096", "4097", "", "007", "1_000", " 5", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseInt("--gen", s, 0, 4096)
		if err != nil {
			return
		}
		if v < 0 || v > 4096 || strings.TrimLeft(s, "0") != strings.TrimLeft(strconv.Itoa(v), "0") {
			t.Fatalf("%q accepted as %d", s, v)
		}
	})
}

func TestParseArgs(t *testing.T) {
	a, err := parseArgs([]string{"dir", "--gen=3", "--gen", "4", "--incremental", "--full-recompute", "--", "--x", "-h"}, runCmd.flags)
	if err != nil || len(a.pos) != 3 || a.pos[1] != "--x" || a.vals["--gen"] != "4" || a.last("--incremental", "--full-recompute") != "--full-recompute" {
		t.Errorf("args %+v err %v (later flags must win; nothing after -- is a flag)", a, err)
	}
	if _, err := parseArgs([]string{"-gen", "3"}, runCmd.flags); err == nil || !strings.Contains(err.Error(), "-gen: unknown flag (did you mean --gen?)") {
		t.Errorf("single-dash form: %v", err)
	}
	for _, argv := range [][]string{{"-h"}, {"m", "--help"}, {"m", "--ids", "-h"}, {"--bogus", "--help"}} {
		if _, err := parseArgs(argv, runCmd.flags); !errors.Is(err, errHelp) {
			t.Errorf("%q: %v, want errHelp", argv, err)
		}
	}
	if a, err := parseArgs([]string{"m", "--prompt=--help"}, runCmd.flags); err != nil || a.vals["--prompt"] != "--help" {
		t.Errorf("--prompt=--help: %+v %v", a, err)
	}
}

func TestParseIntMessages(t *testing.T) {
	for s, want := range map[string]string{
		"-1":                    "--gen: -1 is outside [0, 4096]",
		"-0":                    "--gen: -0 is outside [0, 4096]",
		"x":                     `--gen: "x" is not a decimal integer`,
		"-":                     `--gen: "-" is not a decimal integer`,
		"1 ":                    `--gen: "1 " is not a decimal integer`,
		"+1":                    `--gen: "+1" is not a decimal integer`,
		"-99999999999999999999": "--gen: -99999999999999999999 is outside [0, 4096]",
	} {
		if _, err := parseInt("--gen", s, 0, 4096); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", s, err, want)
		}
	}
	if v, err := parseInt("--x", "-5", -10, 10); err != nil || v != -5 {
		t.Errorf("-5 in [-10, 10]: %d %v", v, err)
	}
}

// FuzzParseArgs: any command line is either parsed or refused with a usage error (or the help
// request); it never panics, and every flag it returns is one of the command's.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"m --ids 1,2 --gen 3", "--help", "m --stop a --stop=b --", "m -gen 3", "m --trunk-gb=0.5 --preset floor --cache-gb 0", "m --ids", "--=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv := strings.Fields(line)
		if len(argv) > 64 {
			return
		}
		a, err := parseArgs(argv, runCmd.flags)
		if err != nil {
			if _, ok := errors.AsType[*usageError](err); !ok && !errors.Is(err, errHelp) {
				t.Fatalf("%q: error %v is neither a usage error nor help", line, err)
			}
			return
		}
		for name := range a.vals {
			if _, ok := runCmd.flags[name]; !ok {
				t.Fatalf("%q: returned unknown flag %q", line, name)
			}
		}
		if _, err := parseRun(a); err != nil {
			if _, ok := errors.AsType[*usageError](err); !ok {
				t.Fatalf("%q: parseRun error %v is not a usage error", line, err)
			}
		}
	})
}
