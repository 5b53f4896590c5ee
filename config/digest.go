package config

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"
)

// Digest is the SHA-256 of the configuration, field by field in declaration order with each
// field's name, leaving out the informative EOSTokenIDs. A field added to Config is covered
// without changing this code. State files record it to refuse a restore into another model.
func (c *Config) Digest() [32]byte {
	h := sha256.New()
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	var b [8]byte
	putU64 := func(x uint64) { binary.LittleEndian.PutUint64(b[:], x); h.Write(b[:]) }
	putStr := func(s string) { putU64(uint64(len(s))); io.WriteString(h, s) }
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == "EOSTokenIDs" {
			continue
		}
		putStr(f.Name)
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int:
			putU64(uint64(fv.Int()))
		case reflect.Float64:
			putU64(math.Float64bits(fv.Float()))
		case reflect.Bool:
			if fv.Bool() {
				putU64(1)
			} else {
				putU64(0)
			}
		case reflect.Slice:
			putU64(uint64(fv.Len()))
			for j := range fv.Len() {
				putU64(uint64(fv.Index(j).Int()))
			}
		default:
			putStr(fmt.Sprint(fv.Interface()))
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
