package safetensors

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeaderNotAliased: the tensor names and the metadata a parsed header yields are copies, not
// substrings of the header text, so the text can be freed (or overwritten) once it is parsed;
// escaped names included.
func TestHeaderNotAliased(t *testing.T) {
	hdr := []byte(`{"__metadata__":{"format":"pt","colibri.fmt":"{}"},` +
		`"model.layers.0.w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"e\u0301":{"dtype":"BF16","shape":[2,1],"data_offsets":[8,12]}}`)
	h, err := ParseHeader("x", hdr, 12)
	require.NoError(t, err)
	copy(hdr, bytes.Repeat([]byte{'#'}, len(hdr)))
	var names []string
	for _, tt := range h.Tensors {
		names = append(names, tt.Name)
	}
	assert.Equal(t, []string{"model.layers.0.w", "e\u0301"}, names)
	assert.Equal(t, map[string]string{"format": "pt", "colibri.fmt": "{}"}, h.Metadata)
}
