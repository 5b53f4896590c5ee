package o200k_test

import (
	"fmt"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// The equivalent of tiktoken.get_encoding("o200k_base").encode(text, allowed_special="all").
func Example() {
	enc, err := o200k.Encoding()
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
	// [24912 2375 199999]
	// "hello world<|endoftext|>"
}
