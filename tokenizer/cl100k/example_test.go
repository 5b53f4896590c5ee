package cl100k_test

import (
	"fmt"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/cl100k"
)

// The equivalent of tiktoken.get_encoding("cl100k_base").encode(text, allowed_special="all").
func Example() {
	enc, err := cl100k.Encoding()
	if err != nil {
		panic(err)
	}
	ids, err := enc.Encode("hello world<|endoftext|>", tokenizer.AllowSpecial)
	if err != nil {
		panic(err)
	}
	text, _ := enc.Decode(ids)
	fmt.Println(ids)
	fmt.Printf("%q\n", text)
	// Output:
	// [15339 1917 100257]
	// "hello world<|endoftext|>"
}
