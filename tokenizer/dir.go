package tokenizer

import (
	"os"
	"path/filepath"
)

// File names of a Kimi tokenizer in a model directory (§10.1).
const (
	RanksFileName  = "tiktoken.model"
	ConfigFileName = "tokenizer_config.json"
)

// LoadDir loads the Kimi tokenizer of a model directory: LoadKimi of its
// tiktoken.model and tokenizer_config.json.
func LoadDir(dir string) (*Encoding, error) {
	return LoadKimi(filepath.Join(dir, RanksFileName), filepath.Join(dir, ConfigFileName))
}

// InDir reports whether dir holds both files of a Kimi tokenizer, the
// ones LoadDir reads.
func InDir(dir string) bool {
	for _, name := range []string{RanksFileName, ConfigFileName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}
