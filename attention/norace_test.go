//go:build !race

package attention

const raceEnabled = false
