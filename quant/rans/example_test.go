package rans_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/k3-project/k3/quant/rans"
)

// Encode 4-bit codes, then decode them into a slot of the decoded size.
func Example() {
	rng := rand.New(rand.NewPCG(1, 2))
	weights := make([]byte, 4096) // 8192 int4 codes of a rounded Gaussian
	for i := range weights {
		lo := byte(8+int(rng.NormFloat64()*2)) & 15
		hi := byte(8+int(rng.NormFloat64()*2)) & 15
		weights[i] = lo | hi<<4
	}
	rec, err := rans.Encode(weights)
	if err != nil {
		panic(err)
	}
	n, err := rans.DecodedLen(rec)
	if err != nil {
		panic(err)
	}
	slot := make([]byte, n)
	var d rans.Decoder // reuse one per worker: it holds the 20 KiB slot tables
	if err := d.DecodeInto(slot, rec); err != nil {
		panic(err)
	}
	fmt.Println(n, len(rec) < len(weights), string(slot) == string(weights))
	// A truncated record is refused.
	fmt.Println(d.DecodeInto(slot, rec[:len(rec)-1]) != nil)
	// Output:
	// 4096 true true
	// true
}

// Repack a checkpoint's routed experts and verify the result.
func ExampleRepack() {
	experts := func(name string) (scale string, ok bool) {
		const suffix = ".weight_packed"
		if len(name) > len(suffix) && name[len(name)-len(suffix):] == suffix {
			return name[:len(name)-len(suffix)] + ".weight_scale", true
		}
		return "", false
	}
	man, err := rans.Repack("model_dir", "out_dir", rans.RepackOptions{Select: experts})
	if err != nil {
		fmt.Println(err)
		return
	}
	decoded, stored := man.Totals()
	fmt.Println(len(man.Tensors), decoded, stored)
	if _, err := rans.Verify("out_dir", rans.VerifyOptions{}); err != nil {
		fmt.Println(err)
	}
}
