//go:build !amd64 || purego

package fmath

import "testing"

func kernelSettings(testing.TB) []string { return []string{"scalar"} }

func setKernel(string) {}
