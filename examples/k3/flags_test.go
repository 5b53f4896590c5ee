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
	for _, s := range []string{"1,2,3", "abc", "1,,2", "", " 7 , 8", "-1", "99999999999999999999", "0", "1,2,", "+3", "0x1f", "1e3", "-0"} {
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
			p = strings.TrimSpace(p)
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
	pos, vals, err := parseArgs([]string{"dir", "--gen=3", "--gen", "4", "--incremental", "--", "--x"}, runFlags)
	if err != nil || len(pos) != 2 || pos[1] != "--x" || vals["--gen"] != "4" {
		t.Errorf("pos %q vals %v err %v (later flags must win)", pos, vals, err)
	}
	if _, _, err := parseArgs([]string{"-gen", "3"}, runFlags); err != nil {
		t.Errorf("single-dash form: %v", err)
	}
}
