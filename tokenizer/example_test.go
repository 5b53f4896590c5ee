package tokenizer_test

import (
	"fmt"

	"github.com/k3-project/k3/tokenizer"
)

// A tiny vocabulary built in code: the 256 single bytes plus a few merges.
// Real users call LoadKimi(".../tiktoken.model", ".../tokenizer_config.json")
// or LoadRanks with the cl100k_base / o200k_base files instead.
func Example() {
	toks := make([][]byte, 256)
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	for _, s := range []string{"he", "ll", "hell", "hello", " w", "or", " wor", " world"} {
		toks = append(toks, []byte(s))
	}
	ranks, err := tokenizer.NewRanks(toks)
	if err != nil {
		panic(err)
	}
	enc, err := tokenizer.New(tokenizer.Spec{
		Name:     "toy",
		Ranks:    ranks,
		Split:    tokenizer.SplitKimi,
		Specials: map[string]int{"[EOS]": 300},
	})
	if err != nil {
		panic(err)
	}

	// The zero Mode, NoSpecial, keeps special names as plain text.
	plain, _ := enc.Encode("hello world[EOS]", tokenizer.NoSpecial)
	// AllowSpecial is the Kimi reference behaviour: names become ids.
	ids, _ := enc.Encode("hello world[EOS]", tokenizer.AllowSpecial)
	text, _ := enc.Decode(ids)
	fmt.Println(plain)
	fmt.Println(ids)
	fmt.Printf("%q\n", text)

	// Streaming: text appears only once a UTF-8 sequence is complete.
	d := enc.NewStreamDecoder()
	for _, id := range []int{0xe4, 0xb8, 0xad} { // the three bytes of 中
		s, _ := d.Push(id)
		fmt.Printf("%q ", s)
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// [259 263 91 69 79 83 93]
	// [259 263 300]
	// "hello world[EOS]"
	// "" "" "中" ""
}

// EncodeBatch spreads many texts over goroutines; the ids are those Encode
// gives each text, in the order of the texts.
func ExampleEncoding_EncodeBatch() {
	toks := make([][]byte, 256)
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	toks = append(toks, []byte("he"), []byte("ll"), []byte("hell"), []byte("hello"))
	ranks, err := tokenizer.NewRanks(toks)
	if err != nil {
		panic(err)
	}
	enc, err := tokenizer.New(tokenizer.Spec{Name: "toy", Ranks: ranks, Split: tokenizer.SplitKimi})
	if err != nil {
		panic(err)
	}
	ids, err := enc.EncodeBatch([]string{"hello", "hell", "he"}, tokenizer.NoSpecial, 2)
	fmt.Println(ids, err)
	_, err = enc.EncodeBatch([]string{"ok", "bad \xff"}, tokenizer.NoSpecial, 2)
	fmt.Println(err)
	// Output:
	// [[259] [258] [256]] <nil>
	// tokenizer: invalid UTF-8 at byte offset 4 (text 1 of the batch)
}
