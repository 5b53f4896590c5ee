//go:build !amd64 || purego

package fmath

import "testing"

func kernelSettings(testing.TB) []bool { return []bool{false} }

func setKernel(bool) {}
