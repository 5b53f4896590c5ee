package atomicfile_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/k3-project/k3/atomicfile"
)

// A writer that produces its output as it goes: the deferred Abort removes
// the temporary on every early return, Commit makes the file appear whole.
// A report held in memory is one call: atomicfile.WriteFile(path, b, 0o644).
func Example() {
	dir, err := os.MkdirTemp("", "atomicfile-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "logits.f32")

	write := func() error {
		f, err := atomicfile.Create(path, 0o644)
		if err != nil {
			return err
		}
		defer f.Abort() // after Commit: nothing
		w := bufio.NewWriter(f)
		for i := range 3 {
			fmt.Fprintf(w, "row %d\n", i)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Commit()
	}
	if err := write(); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	es, _ := os.ReadDir(dir)
	fmt.Println(len(es), "file in the directory")
	// Output:
	// row 0
	// row 1
	// row 2
	// 1 file in the directory
}
