//go:build !race

package testkit

// RaceEnabled is true when built with -race (see race.go).
const RaceEnabled = false
