package rans

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const goodManifest = `{"version":1,"tensors":[{"name":"a","format":"mxfp4-cfs1","dtype":"U8","shape":[2,16],` +
	`"decoded_bytes":32,"record_bytes":30,"sha256":"` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"}]}`

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest(strings.NewReader(goodManifest))
	require.NoError(t, err)
	require.Len(t, m.Tensors, 1)
	bad := map[string]string{
		"version":  strings.Replace(goodManifest, `"version":1`, `"version":2`, 1),
		"unknown":  strings.Replace(goodManifest, `"version":1`, `"version":1,"x":0`, 1),
		"format":   strings.Replace(goodManifest, `mxfp4-cfs1`, `mxfp4`, 1),
		"scale":    strings.Replace(goodManifest, `mxfp4-cfs1`, `mxfp4-scale-cfs1`, 1),
		"digest":   strings.Replace(goodManifest, `0123`, `ABCD`, 1),
		"sizes":    strings.Replace(goodManifest, `"record_bytes":30`, `"record_bytes":42`, 1),
		"shape":    strings.Replace(goodManifest, `[2,16]`, `[0,16]`, 1),
		"trailing": goodManifest + "{}",
		"dup":      strings.Replace(goodManifest, `]}`, `,`+goodManifest[strings.Index(goodManifest, `{"name"`):len(goodManifest)-2]+`]}`, 1),
	}
	for name, text := range bad {
		_, err := ParseManifest(strings.NewReader(text))
		require.ErrorIs(t, err, ErrManifest, name)
	}
}

// FuzzParseManifest: ParseManifest never panics, and what it accepts
// re-encodes to a manifest it accepts again unchanged.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{"version":1,"tensors":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		b, err := m.encode()
		require.NoError(t, err)
		m2, err := ParseManifest(bytes.NewReader(b))
		require.NoError(t, err, "re-encoded manifest refused")
		b2, _ := m2.encode()
		require.Equal(t, b, b2, "manifest encoding is not stable")
	})
}
