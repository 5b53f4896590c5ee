//go:build !amd64 || purego

package mxfp4

// defaultKernel is the pure-Go twin: there is no assembly for this build.
var defaultKernel = genericKernel

// asmKernel reports whether an assembly kernel exists and can run here.
func asmKernel() (kernel, bool) { return kernel{}, false }
