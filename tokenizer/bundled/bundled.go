// Package bundled finds the encodings whose rank files ship inside this
// module (tokenizer/cl100k and tokenizer/o200k) by name, as
// tiktoken.get_encoding does. Importing it links both rank files into the
// program; a program that needs one encoding imports its package instead.
package bundled

import (
	"errors"
	"fmt"
	"strings"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/cl100k"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// ErrUnknown: no bundled encoding has the name.
var ErrUnknown = errors.New("bundled: unknown encoding")

// Names lists the bundled encodings' names, sorted.
func Names() []string { return []string{cl100k.Name, o200k.Name} }

// GetEncoding returns the bundled encoding called name ("cl100k_base" or
// "o200k_base"), parsed on its first use and shared afterwards.
func GetEncoding(name string) (*tokenizer.Encoding, error) {
	switch name {
	case cl100k.Name:
		return cl100k.Encoding()
	case o200k.Name:
		return o200k.Encoding()
	}
	return nil, fmt.Errorf("%w %q (bundled: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}
