package strictjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// headerDoc is shaped like a safetensors header: many small objects under
// long keys, the biggest JSON the library parses.
func headerDoc(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"__metadata__":{"format":"pt"}`)
	off := 0
	for i := 0; i < n; i++ {
		size := 7168 * 1536 * 2
		fmt.Fprintf(&b, `,"language_model.model.layers.%d.block_sparse_moe.experts.%d.w1.weight_packed":{"dtype":"U8","shape":[3072,1792],"data_offsets":[%d,%d]}`,
			i/896, i%896, off, off+size)
		off += size
	}
	b.WriteString("}")
	return []byte(b.String())
}

func BenchmarkParse(b *testing.B) {
	data := headerDoc(5000)
	b.Run("strictjson", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("paired_readloop", func(b *testing.B) {
		testkit.Paired(b, testkit.Filled(len(data)), 1, func() {
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		})
	})
}
