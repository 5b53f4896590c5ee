package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestVerifyManifestSyntax: a malformed --manifest is a usage error (exit 2) before the
// checkpoint is looked at; a well-formed one (two spaces or " *") gets past it.
func TestVerifyManifestSyntax(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	manifest := func(s string) string {
		p := filepath.Join(t.TempDir(), "m.sha256")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := t.TempDir() // no shards: a well-formed manifest fails later, with exit 1
	code, _, stderr := runCLI(t, "verify", empty, "--manifest", manifest(sum+"  a.safetensors\n"+sum+" *config.json\n"))
	assert.Equal(t, exitRuntime, code, stderr)
	for i, bad := range []string{
		"", sum + " a\n", sum + "  a/b\n", sum + "  ..\n", "0X" + sum[2:] + "  a\n",
		sum + "  a\n" + sum + "  a\n", sum[:63] + "  a\n", "ABCDEF" + sum[6:] + "  a\n",
	} {
		code, _, stderr := runCLI(t, "verify", empty, "--manifest", manifest(bad))
		assert.Equal(t, exitUsage, code, strconv.Itoa(i))
		assert.Contains(t, stderr, "--manifest", strconv.Itoa(i))
	}
}
