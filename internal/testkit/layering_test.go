package testkit

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTestsImportTestkit walks the module's Go files: apart from
// testkit's own, no file outside a _test.go imports testkit or its
// subpackages (it imports "testing", and it is for tests only).
func TestOnlyTestsImportTestkit(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	const kit = "github.com/k3-project/k3/internal/testkit"
	self := filepath.Join(root, "internal", "testkit")
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Nested modules (examples/k3 has its own go.mod) follow their
			// own rules; testdata holds no code.
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || hasGoMod(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, self+string(filepath.Separator)) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == kit || strings.HasPrefix(p, kit+"/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: only tests may", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
