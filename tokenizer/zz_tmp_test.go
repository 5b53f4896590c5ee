package tokenizer

import (
	"math/rand"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZLongCPU(t *testing.T) {
	fe := fixtureByName(t, "kimi-o200k")
	rng := rand.New(rand.NewSource(4))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	piece := string(b)
	best := time.Hour
	for r := 0; r < 5; r++ {
		c0 := cpuNow()
		fe.enc.EncodeOrdinary(piece)
		if d := cpuNow() - c0; d < best {
			best = d
		}
	}
	t.Logf("1 MiB piece: %v CPU (best of 5)", best)
	sp := ""
	for i := 0; i < 10000; i++ {
		sp += " "
	}
	best = time.Hour
	for r := 0; r < 20; r++ {
		c0 := cpuNow()
		fe.enc.EncodeOrdinary(sp + "x")
		if d := cpuNow() - c0; d < best {
			best = d
		}
	}
	t.Logf("10k spaces: %v CPU (best of 20)", best)
}
