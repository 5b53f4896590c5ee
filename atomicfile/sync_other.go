//go:build !unix

package atomicfile

import "errors"

// errInvalid never matches off Unix: a directory sync error is reported.
var errInvalid = errors.New("atomicfile: no such error")
