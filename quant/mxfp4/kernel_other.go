//go:build !amd64 || purego

package mxfp4

// defaultKernel is the pure-Go twin: there is no assembly for this build.
var defaultKernel = genericKernel

// asmKernels returns no kernels: there is no assembly in this build.
func asmKernels() map[string]kernel { return nil }
