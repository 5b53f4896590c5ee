//go:build unix

package atomicfile

import "syscall"

// errInvalid is what fsync of a directory returns where it is not supported.
var errInvalid error = syscall.EINVAL
