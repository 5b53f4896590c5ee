package o200k_test

import (
	"fmt"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// Counting the tokens of a text, as tiktoken.get_encoding("o200k_base")
// would: with specials allowed <|endoftext|> is one token; the ordinary
// encoding (encode_ordinary) reads it as plain text.
func Example() {
	enc, err := o200k.Encoding()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mode := range []tokenizer.Mode{tokenizer.AllowSpecial, tokenizer.NoSpecial} {
		n, err := enc.CountTokens("hello world<|endoftext|>", mode)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(n)
	}
	fmt.Println(enc.SpecialTokens()["<|endoftext|>"])
	// Output:
	// 3
	// 9
	// 199999
}
