//go:build purego

package k3_test

// puregoBuild reports whether this test binary was built with -tags purego, i.e. runs the pure-Go
// twins of every assembly kernel.
const puregoBuild = true
