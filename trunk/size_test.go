package trunk

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSize: units by magnitude, three significant digits, rounding carried into the next unit.
func TestSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 640: "640 B", 999: "999 B", 1000: "1.00 kB", 3_700_000: "3.70 MB", 58_368: "58.4 kB",
		4_000_000: "4.00 MB", 12_345_678_901: "12.3 GB", 137_000_000_000: "137 GB", 1_560_000_000_000: "1.56 TB",
		999_600: "1.00 MB", -2_500_000: "-2.50 MB",
	} {
		assert.Equal(t, want, Size(n), "%d", n)
	}
}
