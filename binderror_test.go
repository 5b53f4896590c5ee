package k3

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/k3-project/k3/safetensors"
)

// TestBindErrorGroupsShards: tensors of one absent shard are one line; lone entries stay as they are.
func TestBindErrorGroupsShards(t *testing.T) {
	e := &BindError{Dir: "m", Missing: []MissingTensor{
		{Name: "a", Shard: "s2", State: safetensors.ShardAbsent},
		{Name: "lonely"},
		{Name: "b", Shard: "s2", State: safetensors.ShardAbsent},
		{Name: "c", Shard: "s3", State: safetensors.ShardLacking},
		{Name: "d", Shard: "s2", State: safetensors.ShardAbsent},
		{Name: "e", Packed: "p/trunk.json"},
	}, Mismatched: []string{"x: found F32 [2], want BF16 [2]"}}
	want := "k3: cannot bind the checkpoint in m: 6 tensor(s) missing, 1 mis-typed or mis-shaped\n" +
		"  missing: 3 tensors the index places in shard s2 (" + safetensors.ShardAbsent.String() + "), the first a\n" +
		"  missing: lonely\n" +
		"  missing: c (index: shard s3, " + safetensors.ShardLacking.String() + ")\n" +
		"  missing: e (not in p/trunk.json)\n" +
		"  mismatched: x: found F32 [2], want BF16 [2]"
	assert.Equal(t, want, e.Error())
	assert.Equal(t, 1, strings.Count((&BindError{Dir: "m", Missing: []MissingTensor{{Name: "a", Shard: "s", State: safetensors.ShardAbsent}, {Name: "b", Shard: "s", State: safetensors.ShardAbsent}}}).Error(), "\n"))
}
