package safetensors

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// WriteTensor is one tensor to write. Exactly one way of supplying the
// bytes applies: Data when non-nil; otherwise Fill when set; otherwise the
// tensor becomes a sparse hole that reads as zeros and costs no disk
// (how multi-terabyte synthetic checkpoints are made).
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
	// Fill streams the bytes of a tensor whose Data is nil: it must write
	// exactly the tensor's byte size to w. A generator can thus produce a
	// shard without holding it in memory.
	Fill func(w io.Writer) error
}

// EncodeHeader returns the header WriteFile writes for tensors (contiguous
// offsets in the given order, metadata keys sorted, padded with spaces to a
// multiple of 8 bytes) without the 8-byte length prefix, plus each tensor's
// byte size.
func EncodeHeader(tensors []WriteTensor, metadata map[string]string) ([]byte, []int64, error) {
	sizes := make([]int64, len(tensors))
	seen := make(map[string]int, len(tensors))
	b := make([]byte, 0, 64+100*len(tensors))
	b = append(b, '{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, &Error{Tensor: "__metadata__", Pos: -1, Err: ErrInvalidUTF8, Detail: strconv.Quote(k)}
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `"__metadata__":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = strictjson.AppendQuote(b, k)
			b = append(b, ':')
			b = strictjson.AppendQuote(b, metadata[k])
		}
		b = append(b, '}')
	}
	var off int64
	for i := range tensors {
		t := &tensors[i]
		if t.Name == "" || t.Name == "__metadata__" || !utf8.ValidString(t.Name) {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrInvalidName}
		}
		if j, dup := seen[t.Name]; dup {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrDuplicateKey, Detail: "tensors " + strconv.Itoa(j) + " and " + strconv.Itoa(i)}
		}
		seen[t.Name] = i
		if !t.DType.Valid() {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrUnknownDType, Detail: t.DType.String()}
		}
		if len(t.Shape) > MaxRank {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrRankTooLarge}
		}
		_, nb, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: err, Detail: t.DType.String() + fmtShape(t.Shape)}
		}
		if t.Data != nil && int64(len(t.Data)) != nb {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrDataLength,
				Detail: strconv.Itoa(len(t.Data)) + " bytes for " + t.DType.String() + fmtShape(t.Shape) + " (" + strconv.FormatInt(nb, 10) + ")"}
		}
		if off > maxInt64-nb {
			return nil, nil, &Error{Tensor: t.Name, Pos: -1, Err: ErrNumelOverflow, Detail: "file size overflows"}
		}
		sizes[i] = nb
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strictjson.AppendQuote(b, t.Name)
		b = append(b, `:{"dtype":"`...)
		b = append(b, t.DType.String()...)
		b = append(b, `","shape":[`...)
		for k, d := range t.Shape {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, off, 10)
		b = append(b, ',')
		off += nb
		b = strconv.AppendInt(b, off, 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for len(b)%8 != 0 {
		b = append(b, ' ')
	}
	if len(b) > MaxHeaderSize {
		return nil, nil, &Error{Pos: -1, Err: ErrHeaderTooLarge, Detail: strconv.Itoa(len(b)) + " bytes"}
	}
	return b, sizes, nil
}

// WriteFile writes one safetensors file. The output depends only on the
// arguments (same input, same bytes) and passes this package's validation.
// The file is written under a temporary name and renamed into place.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	hdr, sizes, err := EncodeHeader(tensors, metadata)
	if err != nil {
		return withFile(err, path)
	}
	return writeAtomic(path, func(f *os.File) error { return writeBody(f, hdr, tensors, sizes) })
}

func writeAtomic(path string, body func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = body(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func writeBody(f *os.File, hdr []byte, tensors []WriteTensor, sizes []int64) error {
	w := bufio.NewWriterSize(f, 1<<20)
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(len(hdr)))
	w.Write(pre[:])
	w.Write(hdr)
	pos := 8 + int64(len(hdr))
	for i := range tensors {
		t := &tensors[i]
		switch {
		case t.Data != nil:
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		case t.Fill != nil:
			cw := &countWriter{w: w, limit: sizes[i]}
			if err := t.Fill(cw); err != nil {
				return fmt.Errorf("safetensors: filling %q: %w", t.Name, err)
			}
			if cw.n != sizes[i] {
				return &Error{Tensor: t.Name, Pos: -1, Err: ErrDataLength,
					Detail: "Fill wrote " + strconv.FormatInt(cw.n, 10) + " of " + strconv.FormatInt(sizes[i], 10) + " bytes"}
			}
		case sizes[i] > 0:
			// A hole: skip over it; the final Truncate extends the file when
			// holes come last.
			if err := w.Flush(); err != nil {
				return err
			}
			if _, err := f.Seek(pos+sizes[i], io.SeekStart); err != nil {
				return err
			}
		}
		pos += sizes[i]
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Truncate(pos)
}

type countWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.limit-c.n {
		return 0, &Error{Pos: -1, Err: ErrDataLength, Detail: "Fill wrote past the tensor's size"}
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ShardFileName returns the conventional name of shard i (one-based) of n.
func ShardFileName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
}

// WriteSharded writes shards[i] to dir/ShardFileName(i+1, len(shards)) and
// a model.safetensors.index.json whose weight_map (sorted by name) lists
// every tensor and whose metadata.total_size is the sum of their sizes.
// metadata goes into every shard's __metadata__. Names must be unique
// across shards. dir is created (with parents) if it does not exist.
func WriteSharded(dir string, shards [][]WriteTensor, metadata map[string]string) error {
	if len(shards) == 0 {
		return &Error{File: dir, Pos: -1, Err: ErrNoShards}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	where := make(map[string]int)
	var total int64
	for i, ts := range shards {
		for _, t := range ts {
			if j, dup := where[t.Name]; dup && j != i {
				return &Error{File: ShardFileName(i+1, len(shards)), Tensor: t.Name, Pos: -1, Err: ErrDuplicateTensor,
					Detail: "also in " + ShardFileName(j+1, len(shards))}
			}
			where[t.Name] = i
		}
	}
	for i, ts := range shards {
		name := ShardFileName(i+1, len(shards))
		hdr, sizes, err := EncodeHeader(ts, metadata)
		if err != nil {
			return withFile(err, filepath.Join(dir, name))
		}
		for _, s := range sizes {
			if total > maxInt64-s {
				return &Error{File: dir, Pos: -1, Err: ErrNumelOverflow, Detail: "total size overflows"}
			}
			total += s
		}
		if err := writeAtomic(filepath.Join(dir, name), func(f *os.File) error { return writeBody(f, hdr, ts, sizes) }); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(where))
	for n := range where {
		names = append(names, n)
	}
	slices.Sort(names)
	b := make([]byte, 0, 64+100*len(names))
	b = append(b, "{\n  \"metadata\": {\n    \"total_size\": "...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, "\n  },\n  \"weight_map\": {"...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = strictjson.AppendQuote(b, n)
		b = append(b, ": "...)
		b = strictjson.AppendQuote(b, ShardFileName(where[n]+1, len(shards)))
	}
	b = append(b, "\n  }\n}\n"...)
	return writeAtomic(filepath.Join(dir, IndexFileName), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}
