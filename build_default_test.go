//go:build !purego

package k3_test

// puregoBuild reports whether this test binary was built with -tags purego; in this build the
// amd64 assembly kernels are active where the CPU supports them.
const puregoBuild = false
