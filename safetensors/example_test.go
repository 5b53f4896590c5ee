package safetensors_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/k3-project/k3/safetensors"
)

// Open a sharded checkpoint directory, look tensors up by name and read
// them widened to float32.
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A two-shard checkpoint with its index file.
	norm := make([]byte, 8)
	for i, v := range []float32{0.5, 2} {
		binary.LittleEndian.PutUint32(norm[4*i:], math.Float32bits(v))
	}
	embed := []byte{0x80, 0x3f, 0x00, 0xc0, 0x00, 0x00, 0x80, 0x7f} // bf16: 1, -2, 0, +Inf
	err = safetensors.WriteSharded(dir, [][]safetensors.WriteTensor{
		{{Name: "model.embed.weight", DType: safetensors.BF16, Shape: []int64{2, 2}, Data: embed}},
		{{Name: "model.norm.weight", DType: safetensors.F32, Shape: []int64{2}, Data: norm}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}

	ckpt, err := safetensors.Open(dir) // validates every header and the index
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()

	t, ok := ckpt.Tensor("model.embed.weight")
	if !ok {
		log.Fatal("missing")
	}
	vals, err := ckpt.ReadF32(t)
	if err != nil {
		log.Fatal(err)
	}
	raw, err := ckpt.Bytes(t) // zero-copy view of the mapped shard
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.DType, t.Shape, len(raw), "bytes:", vals)

	_, err = ckpt.Require("model.lm_head.weight")
	fmt.Println(errors.Is(err, safetensors.ErrNotFound), err)
	// Output:
	// BF16 [2 2] 8 bytes: [1 -2 0 +Inf]
	// true safetensors: tensor "model.lm_head.weight" not found (not referenced by the index)
}
