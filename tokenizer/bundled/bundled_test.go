package bundled_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/bundled"
	"github.com/k3-project/k3/tokenizer/cl100k"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// TestGetEncoding: each name gives its package's encoding (the same value),
// and an unknown name is ErrUnknown listing the known ones.
func TestGetEncoding(t *testing.T) {
	for name, get := range map[string]func() (*tokenizer.Encoding, error){cl100k.Name: cl100k.Encoding, o200k.Name: o200k.Encoding} {
		enc, err := bundled.GetEncoding(name)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := get()
		if enc != want || enc.Name() != name {
			t.Errorf("%s: got %s", name, enc.Name())
		}
	}
	if len(bundled.Names()) != 2 {
		t.Errorf("Names %v", bundled.Names())
	}
	_, err := bundled.GetEncoding("p50k_base")
	if !errors.Is(err, bundled.ErrUnknown) {
		t.Fatalf("p50k_base: %v", err)
	}
}

func ExampleGetEncoding() {
	enc, err := bundled.GetEncoding("cl100k_base")
	if err != nil {
		panic(err)
	}
	ids, _ := enc.Encode("hello world", tokenizer.NoSpecial)
	fmt.Println(ids)
	// Output: [15339 1917]
}
