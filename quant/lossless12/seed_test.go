package lossless12

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readSeeds parses the corpus files of a fuzz target ("go test fuzz v1"
// followed by one []byte literal).
func readSeeds(dir string) ([][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			return nil, fmt.Errorf("%s: not a fuzz corpus file", e.Name())
		}
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		s, err := strconv.Unquote(lit)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e.Name(), err)
		}
		out = append(out, []byte(s))
	}
	return out, nil
}

// TestWriteSeeds regenerates testdata/fuzz/FuzzOpen when K3_WRITE_SEEDS is
// set; otherwise it is skipped.
func TestWriteSeeds(t *testing.T) {
	if os.Getenv("K3_WRITE_SEEDS") == "" {
		t.Skip("set K3_WRITE_SEEDS=1 to rewrite the fuzz seeds")
	}
	var seeds [][]byte
	add := func(b []byte) { seeds = append(seeds, append([]byte(nil), b...)) }
	s := sample(t)
	add(s)
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x3F80, 0xBF80, 0x0080, 0x2B80}
	enc, err := Encode(3, 4, bf16Bytes(specials))
	if err != nil {
		t.Fatal(err)
	}
	add(enc)
	codes := make([]uint16, 2*70)
	for i := range codes {
		codes[i] = uint16(0x3C00 + 37*i)
	}
	codes[5], codes[80] = 0, 0x0003
	enc, _ = Encode(2, 70, bf16Bytes(codes))
	add(enc)
	enc, _ = Encode(0, 0, nil)
	add(enc)
	bad := append([]byte(nil), s...)
	bad[row0] = 250
	add(bad)
	bad = append([]byte(nil), s...)
	bad[row0+100] = 120
	add(bad)
	bad = append([]byte(nil), s...)
	binary.LittleEndian.PutUint32(bad[12:], 1000)
	add(bad)
	add(s[:20])
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, b := range seeds {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
