package k3

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBindErrorGroupsShards: tensors of one absent shard are one line; lone entries stay as they are.
func TestBindErrorGroupsShards(t *testing.T) {
	e := &BindError{Dir: "m", Missing: []string{
		"a (index: shard s2, shard absent)",
		"lonely",
		"b (index: shard s2, shard absent)",
		"c (index: shard s3, tensor not in shard)",
		"d (index: shard s2, shard absent)",
	}, Mismatched: []string{"x: found F32 [2], want BF16 [2]"}}
	want := "k3: cannot bind the checkpoint in m: 5 tensor(s) missing, 1 mis-typed or mis-shaped\n" +
		"  missing: 3 tensors the index places in shard s2 (shard absent), the first a\n" +
		"  missing: lonely\n" +
		"  missing: c (index: shard s3, tensor not in shard)\n" +
		"  mismatched: x: found F32 [2], want BF16 [2]"
	assert.Equal(t, want, e.Error())
	assert.Equal(t, 1, strings.Count((&BindError{Dir: "m", Missing: []string{"a (index: shard s, absent)", "b (index: shard s, absent)"}}).Error(), "\n"))
}
