// Package docs holds the design document of k3 (design.md and its chapters) and the test that
// keeps every section reference of the repository pointing at one of its headings.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/k3-project/k3/internal/testkit"
)

// headingRE is a section heading of the design document: "## §4 Title", "### §4.5 Title",
// "#### §6.9.1 Title". The number of '#' must match the depth of the number.
var headingRE = regexp.MustCompile(`^(#{2,4}) §([0-9]+(?:\.[0-9]+)*) \S`)

// refRE is a section reference anywhere in a source or document file, whatever word precedes
// it ("SPEC §3.3", "§3.3", "see §9.2"). A trailing sentence period is not part of the number.
var refRE = regexp.MustCompile(`§ ?([0-9]+(?:\.[0-9]+)*)`)

// external lists words that, right before a '§', mark a section of another document (the
// tokenizer cites a section of the Unicode Standard as "Unicode §N.M"), not of the design
// document.
var external = []string{"Unicode"}

// skipDir reports whether the walk stays out of a directory: version control, test data,
// vendored or generated trees, and hidden or underscore directories (as the go tool does).
func skipDir(name string) bool {
	switch name {
	case "testdata", "vendor", "node_modules", "third_party":
		return true
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// checked reports whether a file's references are checked.
func checked(name string) bool {
	return strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".s") || strings.HasSuffix(name, ".md")
}

type location struct {
	file string
	line int
}

func (l location) String() string { return fmt.Sprintf("%s:%d", l.file, l.line) }

// headings collects the section headings of every .md file under dir. A number defined twice
// and a heading whose depth does not match its number are problems.
func headings(fsys fs.FS, dir string) (map[string]location, []string, error) {
	defs := map[string]location{}
	var problems []string
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && skipDir(d.Name()) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		return eachLine(fsys, p, func(n int, line string) {
			m := headingRE.FindStringSubmatch(line)
			if m == nil {
				return
			}
			at := location{p, n}
			num := m[2]
			if depth := strings.Count(num, ".") + 2; len(m[1]) != depth {
				problems = append(problems, fmt.Sprintf("%v: heading §%s has %d '#', want %d", at, num, len(m[1]), depth))
			}
			if prev, ok := defs[num]; ok {
				problems = append(problems, fmt.Sprintf("%v: heading §%s defined again (first at %v)", at, num, prev))
				return
			}
			defs[num] = at
		})
	})
	return defs, problems, err
}

// references returns the problems of every section reference in the tree: a number with no
// heading in defs.
func references(fsys fs.FS, defs map[string]location) ([]string, int, error) {
	var problems []string
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "." {
				return nil
			}
			if skipDir(d.Name()) {
				return fs.SkipDir
			}
			// A nested repository or worktree (a .git entry of its own) is not this tree.
			if _, err := fs.Stat(fsys, path.Join(p, ".git")); err == nil {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !checked(d.Name()) {
			return nil
		}
		return eachLine(fsys, p, func(ln int, line string) {
			if strings.HasSuffix(p, ".md") && headingRE.MatchString(line) {
				return // a heading defines its number; headings() checks it
			}
			for _, m := range refRE.FindAllStringSubmatchIndex(line, -1) {
				if isExternal(line[:m[0]]) {
					continue
				}
				n++
				num := line[m[2]:m[3]]
				if _, ok := defs[num]; !ok {
					problems = append(problems, fmt.Sprintf("%v: §%s has no heading in docs/", location{p, ln}, num))
				}
			}
		})
	})
	return problems, n, err
}

// isExternal reports whether the text before a '§' ends with a word of external.
func isExternal(before string) bool {
	before = strings.TrimRight(before, " ")
	for _, w := range external {
		if strings.HasSuffix(before, w) {
			return true
		}
	}
	return false
}

func eachLine(fsys fs.FS, name string, fn func(n int, line string)) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	err = testkit.Lines(f, func(n int, line []byte) error {
		fn(n, string(line))
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// check runs both checks over the tree rooted at fsys, with the design document under docDir.
func check(fsys fs.FS, docDir string) (problems []string, defs map[string]location, refs int, err error) {
	defs, problems, err = headings(fsys, docDir)
	if err != nil {
		return nil, nil, 0, err
	}
	more, refs, err := references(fsys, defs)
	if err != nil {
		return nil, nil, 0, err
	}
	return append(problems, more...), defs, refs, nil
}

// TestSectionReferences walks the repository (the parent of this directory) and fails for
// every § reference with no heading in docs/ and for every heading defined twice.
func TestSectionReferences(t *testing.T) {
	root := ".."
	mod, err := os.ReadFile(path.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(mod), "module github.com/k3-project/k3\n") {
		t.Fatalf("the parent of docs/ is not the k3 module root (go.mod: %v)", err)
	}
	problems, defs, refs, err := check(os.DirFS(root), "docs")
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("no § headings found under docs/")
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d § references checked against %d headings", refs, len(defs))
}

// TestCheckFails shows that the check catches what it is for: a reference with no heading, a
// heading defined twice (in one file or across two), and a heading of the wrong depth; and that
// it leaves alone external sections, test data and nested repositories.
func TestCheckFails(t *testing.T) {
	// The section sign is spelled out so that this file's own references stay real.
	const S = "\u00a7"
	fsys := fstest.MapFS{
		"go.mod":        {Data: []byte("module example\n")},
		"docs/a.md":     {Data: []byte("# Design\n\n## " + S + "1 Scope\n\n### " + S + "1.2 Map\n\n### " + S + "2.1 Shapes\n#### " + S + "1.3 Wrong depth\n")},
		"docs/b.md":     {Data: []byte("## " + S + "2 Configuration\n### " + S + "1.2 Map again\n")},
		"x.go":          {Data: []byte("package x\n\n// see SPEC " + S + "1.2 and " + S + "2.\n// bogus " + S + "99.9.\n")},
		"y.s":           {Data: []byte("// " + S + "2.1, then " + S + "7.\n")},
		"README.md":     {Data: []byte("The Unicode " + S + "3.9 rule, and the " + S + "1.2 map.\n")},
		"testdata/t.go": {Data: []byte("// " + S + "42\n")},
		"nested/.git":   {Data: []byte("gitdir: elsewhere\n")},
		"nested/n.go":   {Data: []byte("// " + S + "43\n")},
	}
	problems, _, refs, err := check(fsys, "docs")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"docs/a.md:8: heading " + S + "1.3 has 4 '#', want 3",
		"docs/b.md:2: heading " + S + "1.2 defined again (first at docs/a.md:5)",
		"x.go:4: " + S + "99.9 has no heading in docs/",
		"y.s:1: " + S + "7 has no heading in docs/",
	}
	slices.Sort(problems)
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if refs != 6 {
		t.Errorf("%d references checked, want 6", refs)
	}
}
