package rans

import (
	"fmt"

	"github.com/k3-project/k3/quant/cfs1"
)

// Encode returns the CFS1 nibble record (mode 1) of 4-bit weight bytes, or
// a raw record (mode 0) when coding would not make it shorter, so a record
// never exceeds its input by more than 9 bytes. The output depends on data
// only, and is decoded and compared with data before it is returned.
func Encode(data []byte) ([]byte, error) {
	rec, err := cfs1.Encode(data, cfs1.ModeNibble)
	if err != nil {
		return nil, fmt.Errorf("rans: %w", err)
	}
	return rec, nil
}

// EncodeBytes is Encode over byte symbols (mode 2), for E8M0 scale arrays.
func EncodeBytes(data []byte) ([]byte, error) {
	rec, err := cfs1.Encode(data, cfs1.ModeByte)
	if err != nil {
		return nil, fmt.Errorf("rans: %w", err)
	}
	return rec, nil
}
