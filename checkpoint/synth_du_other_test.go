//go:build !unix

package checkpoint

import "testing"

func diskUsage(t *testing.T, dir string) int64 { t.Skip("block counts need unix"); return 0 }
