package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

const (
	st1 = "model-00001-of-00002.safetensors"
	st2 = "model-00002-of-00002.safetensors"
)

// stCopy copies the st fixtures into a temp dir.
func stCopy(t *testing.T) string {
	t.Helper()
	return testkit.CopyDir(t, testkit.Path(t, "st"))
}

// rewriteHeader replaces the header of dir/name by edit(header) (and the
// data by editData(data) when given), fixing the length prefix.
func rewriteHeader(t *testing.T, path string, edit func(string) string, editData func([]byte) []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	hdr := edit(string(raw[8 : 8+n]))
	data := raw[8+n:]
	if editData != nil {
		data = editData(slices.Clone(data))
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(append(out, hdr...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceOnce(t *testing.T, old, new string) func(string) string {
	return func(s string) string {
		if strings.Count(s, old) != 1 {
			t.Fatalf("%q occurs %d times", old, strings.Count(s, old))
		}
		return strings.Replace(s, old, new, 1)
	}
}

// expectErr opens path and checks the sentinel, the *Error's file and (when
// tensor != "") its tensor.
func expectErr(t *testing.T, path string, sentinel error, file, tensor string, opts ...Option) {
	t.Helper()
	c, err := Open(path, opts...)
	if err == nil {
		c.Close()
		t.Fatalf("open succeeded, want %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("got %v, want %v", err, sentinel)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not an *Error", err)
	}
	if file != "" && filepath.Base(e.File) != file {
		t.Errorf("error names file %q, want %q (%v)", e.File, file, err)
	}
	if tensor != "" && e.Tensor != tensor {
		t.Errorf("error names tensor %q, want %q (%v)", e.Tensor, tensor, err)
	}
}

func TestCorruptShards(t *testing.T) {
	type tc struct {
		name     string
		mutate   func(t *testing.T, dir string)
		sentinel error
		file     string
		tensor   string
	}
	p1 := func(dir string) string { return filepath.Join(dir, st1) }
	// edit replaces old by new, once, in the first shard's header.
	edit := func(old, new string) func(*testing.T, string) {
		return func(t *testing.T, d string) { rewriteHeader(t, p1(d), replaceOnce(t, old, new), nil) }
	}
	cases := []tc{
		{"cut to 4 bytes", func(t *testing.T, d string) { os.Truncate(p1(d), 4) }, ErrFileTooSmall, st1, ""},
		{"N all 0xFF", func(t *testing.T, d string) {
			f, _ := os.OpenFile(p1(d), os.O_WRONLY, 0)
			f.WriteAt([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 0)
			f.Close()
		}, ErrHeaderTooLarge, st1, ""},
		{"N beyond file", func(t *testing.T, d string) {
			f, _ := os.OpenFile(p1(d), os.O_WRONLY, 0)
			f.WriteAt(binary.LittleEndian.AppendUint64(nil, 2906-7), 0)
			f.Close()
		}, ErrHeaderBeyondFile, st1, ""},
		{"N below 2", func(t *testing.T, d string) {
			f, _ := os.OpenFile(p1(d), os.O_WRONLY, 0)
			f.WriteAt(binary.LittleEndian.AppendUint64(nil, 1), 0)
			f.Close()
		}, ErrHeaderTooSmall, st1, ""},
		{"byte 8 { to [", func(t *testing.T, d string) {
			f, _ := os.OpenFile(p1(d), os.O_WRONLY, 0)
			f.WriteAt([]byte{'['}, 8)
			f.Close()
		}, ErrNotObject, st1, ""},
		{"truncated to 8+N", func(t *testing.T, d string) { os.Truncate(p1(d), 8+1022) }, ErrDataBeyondFile, st1, "plain.f32.2d"},
		{"truncated data", func(t *testing.T, d string) { os.Truncate(p1(d), 2906-5) }, ErrDataBeyondFile, st1, "rank4.u8"},
		{"overlap", edit("[1860, 1876]", "[1850, 1866]"), ErrOverlap, st1, "rank4.u8"},
		{"gap", func(t *testing.T, d string) {
			rewriteHeader(t, p1(d), replaceOnce(t, "[1860, 1876]", "[1861, 1877]"), func(b []byte) []byte { return append(b, 0) })
		}, ErrGap, st1, "rank4.u8"},
		{"trailing bytes", func(t *testing.T, d string) {
			rewriteHeader(t, p1(d), func(s string) string { return s }, func(b []byte) []byte { return append(b, 0) })
		}, ErrTrailingBytes, st1, ""},
		{"shape/bytes mismatch", edit(`[16, 16]`, `[16, 15]`), ErrSizeMismatch, st1, "plain.f32.2d"},
		{"unknown dtype", edit(`"BF16"`, `"BF17"`), ErrUnknownDType, st1, "plain.bf16.1d"},
		{"non-string metadata", edit(`"format": "pt"`, `"format": 1`), ErrMetadataValue, st1, "__metadata__"},
		{"metadata not an object", func(t *testing.T, d string) {
			rewriteHeader(t, p1(d), func(s string) string {
				i, j := strings.Index(s, `{"format"`), strings.Index(s, `"plain.f32.2d"`)
				return s[:i] + `"x", ` + s[j:]
			}, nil)
		}, ErrMetadataNotObject, st1, "__metadata__"},
		{"duplicate key in entry", edit(`{"dtype": "F32", "shape": [], `, `{"dtype": "F32", "dtype": "F32", "shape": [], `), ErrDuplicateKey, st1, "scalar.f32"},
		{"duplicate tensor key", edit(`"rank4.u8"`, `"rank3.f32"`), ErrDuplicateKey, st1, "rank3.f32"},
		{"duplicate key via escape", edit(`"rank4.u8"`, `"\u0072ank3.f32"`), ErrDuplicateKey, st1, "rank3.f32"},
		{"lone surrogate", edit(`"scalar.f32"`, `"scalar\ud800.f32"`), ErrLoneSurrogate, st1, ""},
		{"invalid escape", edit(`"scalar.f32"`, `"scalar\x.f32"`), ErrInvalidEscape, st1, ""},
		{"trailing comma", edit(`[2, 2, 2, 2]`, `[2, 2, 2, 2,]`), ErrBadShape, st1, "rank4.u8"},
		{"garbage after object", func(t *testing.T, d string) {
			rewriteHeader(t, p1(d), func(s string) string { return s + "  \n\f" }, nil)
		}, ErrTrailingGarbage, st1, ""},
		{"invalid UTF-8", edit(`"scalar.f32"`, "\"scalar\xff.f32\""), ErrInvalidUTF8, st1, ""},
		{"NaN offset", edit(`[1860, 1876]`, `[NaN, 1876]`), ErrBadOffsets, st1, "rank4.u8"},
		{"fractional dim", edit(`[2, 2, 2, 2]`, `[2, 2, 2, 2.0]`), ErrBadInteger, st1, "rank4.u8"},
		{"negative dim", edit(`[2, 2, 2, 2]`, `[2, 2, -2, 2]`), ErrBadInteger, st1, "rank4.u8"},
		{"overflowing offset", edit(`[1860, 1876]`, `[1860, 18446744073709551617]`), ErrIntegerOverflow, st1, "rank4.u8"},
		{"rank 9", edit(`[2, 2, 2, 2]`, `[2, 2, 2, 2, 1, 1, 1, 1, 1]`), ErrRankTooLarge, st1, "rank4.u8"},
		{"missing field", edit(`"dtype": "U8", "shape": [2, 2, 2, 2], `, `"shape": [2, 2, 2, 2], `), ErrMissingField, st1, "rank4.u8"},
		{"extra field", edit(`"shape": [2, 2, 2, 2], `, `"shape": [2, 2, 2, 2], "x": 1, `), ErrUnknownField, st1, "rank4.u8"},
		{"three offsets", edit(`[1860, 1876]`, `[1860, 1876, 1876]`), ErrBadOffsets, st1, "rank4.u8"},
		{"begin after end", edit(`[1860, 1876]`, `[1876, 1860]`), ErrBadOffsets, st1, "rank4.u8"},
		{"empty name", edit(`"rank4.u8"`, `""`), ErrEmptyName, st1, ""},
		{"entry not an object", func(t *testing.T, d string) {
			rewriteHeader(t, p1(d), func(s string) string {
				return strings.Replace(s, `, "rank4.u8": {"dtype": "U8", "shape": [2, 2, 2, 2], "data_offsets": [1860, 1876]}`, `, "rank4.u8": [1]`, 1)
			}, nil)
		}, ErrEntryNotObject, st1, "rank4.u8"},
		{"duplicate name across shards", func(t *testing.T, d string) {
			rewriteHeader(t, filepath.Join(d, st2), replaceOnce(t, `"second.shard.u8"`, `"packed.u8.2d"`), nil)
		}, ErrDuplicateTensor, st2, "packed.u8.2d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := stCopy(t)
			c.mutate(t, dir)
			expectErr(t, dir, c.sentinel, c.file, c.tensor)
		})
	}
}

// writeIndex writes an index for the st copy after edit(weightMap).
func writeIndex(t *testing.T, dir string, total int64, edit func(map[string]string)) {
	t.Helper()
	wm := map[string]string{}
	for _, sh := range []string{st1, st2} {
		for n := range readIndep(t, filepath.Join(dir, sh)).entries {
			wm[n] = sh
		}
	}
	edit(wm)
	b, err := json.Marshal(map[string]any{"metadata": map[string]int64{"total_size": total}, "weight_map": wm})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestIndex(t *testing.T) {
	const total = 1876 + 712
	t.Run("valid", func(t *testing.T) {
		dir := stCopy(t)
		writeIndex(t, dir, total, func(map[string]string) {})
		c := mustOpen(t, dir)
		if !c.HasIndex() || c.Len() != 13 || len(c.Warnings()) != 0 {
			t.Fatalf("index %v, %d tensors, warnings %v", c.HasIndex(), c.Len(), c.Warnings())
		}
		_, err := c.Require("ghost")
		var me *MissingTensorError
		if !errors.As(err, &me) || me.State != NotReferenced {
			t.Errorf("Require: %v", err)
		}
	})
	cases := []struct {
		name     string
		total    int64
		edit     func(map[string]string)
		sentinel error
		tensor   string
	}{
		{"index names a missing tensor", total, func(m map[string]string) { m["ghost"] = st1 }, ErrIndexTensorMissing, "ghost"},
		{"index misses a shard tensor", total, func(m map[string]string) { delete(m, "rank3.f32") }, ErrIndexUnlisted, "rank3.f32"},
		{"index names a non-existent shard", total, func(m map[string]string) { m["rank3.f32"] = "model-00003-of-00002.safetensors" }, ErrIndexShardMissing, ""},
		{"index names the wrong shard", total, func(m map[string]string) { m["rank3.f32"] = st2 }, ErrIndexWrongShard, "rank3.f32"},
		{"index shard with a path", total, func(m map[string]string) { m["rank3.f32"] = "../" + st1 }, ErrIndexShardName, "rank3.f32"},
		{"index shard dot-dot", total, func(m map[string]string) { m["rank3.f32"] = ".." }, ErrIndexShardName, "rank3.f32"},
		{"total_size mismatch", total + 1, func(map[string]string) {}, ErrIndexTotalSize, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := stCopy(t)
			writeIndex(t, dir, c.total, c.edit)
			expectErr(t, dir, c.sentinel, "", c.tensor)
		})
	}
	t.Run("duplicate key in index", func(t *testing.T) {
		dir := stCopy(t)
		os.WriteFile(filepath.Join(dir, IndexFileName), []byte(`{"weight_map": {"rank3.f32": "`+st1+`", "rank3.f32": "`+st1+`"}}`), 0o644)
		expectErr(t, dir, ErrDuplicateKey, IndexFileName, "rank3.f32")
	})
	t.Run("index without weight_map", func(t *testing.T) {
		dir := stCopy(t)
		os.WriteFile(filepath.Join(dir, IndexFileName), []byte(`{"metadata": {}}`), 0o644)
		expectErr(t, dir, ErrIndexFormat, IndexFileName, "")
	})
	t.Run("stray shard ignored with a warning", func(t *testing.T) {
		dir := stCopy(t)
		var tot int64
		for _, e := range readIndep(t, filepath.Join(dir, st1)).entries {
			tot += e.Offsets[1] - e.Offsets[0]
		}
		writeIndex(t, dir, tot, func(m map[string]string) {
			for k, v := range m {
				if v == st2 {
					delete(m, k)
				}
			}
		})
		var seen []string
		c := mustOpen(t, dir, WithWarnings(func(s string) { seen = append(seen, s) }))
		if c.Len() != 10 || len(c.Shards()) != 1 {
			t.Errorf("%d tensors from %d shards", c.Len(), len(c.Shards()))
		}
		if _, ok := c.Tensor("second.shard.u8"); ok {
			t.Error("stray shard indexed")
		}
		w := c.Warnings()
		if len(w) != 1 || !strings.Contains(w[0], st2) || !slices.Equal(w, seen) {
			t.Errorf("warnings %v, callback %v", w, seen)
		}
	})
	t.Run("incomplete: absent and lacking shards", func(t *testing.T) {
		dir := stCopy(t)
		writeIndex(t, dir, total+4, func(m map[string]string) {
			m["ghost"] = st1
			m["far.away"] = "model-00009-of-00009.safetensors"
		})
		expectErr(t, dir, ErrIndexShardMissing, IndexFileName, "")
		c := mustOpen(t, dir, WithIncomplete())
		if len(c.Warnings()) != 2 {
			t.Errorf("warnings %v", c.Warnings())
		}
		check := func(name, shard string, st ShardState) {
			_, err := c.Require(name)
			var me *MissingTensorError
			if !errors.As(err, &me) || me.Shard != shard || me.State != st || me.Name != name {
				t.Errorf("Require(%q) = %v; want shard %q state %v", name, err, shard, st)
			}
		}
		check("ghost", st1, ShardLacking)
		check("far.away", "model-00009-of-00009.safetensors", ShardAbsent)
		check("nowhere", "", NotReferenced)
		if tt, err := c.Require("rank3.f32"); err != nil || tt.Name != "rank3.f32" {
			t.Errorf("Require present: %v", err)
		}
	})
	t.Run("index above 256 MiB", func(t *testing.T) {
		dir := stCopy(t)
		p := filepath.Join(dir, IndexFileName)
		os.WriteFile(p, []byte(`{"weight_map": {}}`), 0o644)
		if err := os.Truncate(p, MaxIndexSize+1); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
		expectErr(t, dir, ErrIndexTooLarge, IndexFileName, "")
	})
	t.Run("index trailing garbage", func(t *testing.T) {
		dir := stCopy(t)
		os.WriteFile(filepath.Join(dir, IndexFileName), []byte("{\"weight_map\": {}}\n}"), 0o644)
		expectErr(t, dir, ErrTrailingGarbage, IndexFileName, "")
	})
	t.Run("no shards", func(t *testing.T) {
		expectErr(t, t.TempDir(), ErrNoShards, "", "")
	})
}
