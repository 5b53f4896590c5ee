package k3

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/k3-project/k3/internal/regfile"
	"github.com/k3-project/k3/internal/strictjson"
	"github.com/k3-project/k3/safetensors"
)

// Errors of manifest verification (errors.Is).
var (
	// ErrManifest: a manifest file is malformed.
	ErrManifest = errors.New("k3: malformed manifest")
	// ErrManifestMismatch: a checkpoint file is missing, has another size
	// or another SHA-256 than its manifest says.
	ErrManifestMismatch = errors.New("k3: checkpoint differs from its manifest")
)

// MaxManifestSize bounds a manifest file (K3 has about 100 files).
const MaxManifestSize = 16 << 20

// Manifest lists a checkpoint directory's files with their sizes and
// SHA-256 digests, so a download can be verified once, completely, before
// the first run. WriteManifest creates one; VerifyManifest checks a
// directory against it.
type Manifest struct {
	Files []ManifestFile // sorted by Name
}

// ManifestFile is one entry: a file name relative to the checkpoint
// directory, its size and the lower-case hex SHA-256 of its bytes.
type ManifestFile struct {
	Name   string
	Size   int64
	SHA256 string
}

// Progress receives hashing progress: the file being hashed, bytes done in
// it and its size. It may be nil.
type Progress func(file string, done, size int64)

// manifestNames lists what a manifest covers: config.json, the index and
// every shard (the files Open reads), in byte-wise order.
func manifestNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if n == "config.json" || n == safetensors.IndexFileName || strings.HasSuffix(n, ".safetensors") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// BuildManifest hashes the checkpoint files of dir (config.json,
// model.safetensors.index.json and every *.safetensors file).
func BuildManifest(dir string, progress Progress) (*Manifest, error) {
	names, err := manifestNames(dir)
	if err != nil {
		return nil, fmt.Errorf("k3: manifest of %s: %w", dir, err)
	}
	m := &Manifest{}
	for _, n := range names {
		size, sum, err := hashFile(filepath.Join(dir, n), progress)
		if err != nil {
			return nil, fmt.Errorf("k3: manifest of %s: %w", dir, err)
		}
		m.Files = append(m.Files, ManifestFile{Name: n, Size: size, SHA256: sum})
	}
	return m, nil
}

// WriteManifest hashes dir's checkpoint files and writes the manifest to w
// as JSON: {"files": [{"name": …, "size": …, "sha256": …}, …]}.
func WriteManifest(dir string, w io.Writer, progress Progress) error {
	m, err := BuildManifest(dir, progress)
	if err != nil {
		return err
	}
	_, err = w.Write(m.Marshal())
	return err
}

// Marshal encodes m deterministically (ReadManifest reads it back).
func (m *Manifest) Marshal() []byte {
	b := []byte("{\n  \"files\": [")
	for i, f := range m.Files {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    {\"name\": "...)
		b = strictjson.AppendQuote(b, f.Name)
		b = append(b, ", \"size\": "...)
		b = strconv.AppendInt(b, f.Size, 10)
		b = append(b, ", \"sha256\": "...)
		b = strictjson.AppendQuote(b, f.SHA256)
		b = append(b, '}')
	}
	return append(b, "\n  ]\n}\n"...)
}

// ReadManifest parses a manifest (strict JSON, at most MaxManifestSize
// bytes; plain file names, unique; non-negative sizes; 64 hex digits).
func ReadManifest(r io.Reader) (*Manifest, error) {
	root, err := strictjson.ParseReader(r, strictjson.Limits{MaxBytes: MaxManifestSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrManifest, fmt.Sprintf(format, a...))
	}
	files := root.Get("files")
	if files == nil || files.Kind() != strictjson.Array {
		return nil, bad("no files array")
	}
	m := &Manifest{}
	seen := map[string]bool{}
	for i, it := range files.Items() {
		nv, sv, zv := it.Get("name"), it.Get("sha256"), it.Get("size")
		if nv == nil || sv == nil || zv == nil || it.Len() != 3 {
			return nil, bad("files[%d]: want exactly name, size and sha256", i)
		}
		name, err1 := nv.Str()
		sum, err2 := sv.Str()
		size, err3 := zv.Int64()
		switch {
		case err1 != nil || err2 != nil || err3 != nil:
			return nil, bad("files[%d]: want exactly name (string), size (integer) and sha256 (string)", i)
		case name == "" || name != filepath.Base(name) || name == "." || name == "..":
			return nil, bad("files[%d]: %q is not a plain file name", i, name)
		case seen[name]:
			return nil, bad("files[%d]: %q listed twice", i, name)
		case size < 0:
			return nil, bad("files[%d]: negative size", i)
		case len(sum) != 64 || strings.ToLower(sum) != sum || !isHex(sum):
			return nil, bad("files[%d]: sha256 is not 64 lower-case hex digits", i)
		}
		seen[name] = true
		m.Files = append(m.Files, ManifestFile{Name: name, Size: size, SHA256: sum})
	}
	return m, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// ManifestError lists every file of a directory that differs from its
// manifest. It matches ErrManifestMismatch.
type ManifestError struct {
	Dir      string
	Problems []string // one per file: "name: what differs"
}

func (e *ManifestError) Error() string {
	return fmt.Sprintf("k3: %s differs from its manifest: %s", e.Dir, strings.Join(e.Problems, "; "))
}

// Unwrap makes errors.Is(err, ErrManifestMismatch) true.
func (e *ManifestError) Unwrap() error { return ErrManifestMismatch }

// VerifyManifest checks every file the manifest lists: present, a regular
// file, of the listed size (checked for every file first, so a truncated
// shard is reported without hashing terabytes), and of the listed SHA-256.
// Checkpoint files in dir that the manifest does not list are problems too.
// All differences are collected in one *ManifestError.
func VerifyManifest(dir string, m *Manifest, progress Progress) error {
	e := &ManifestError{Dir: dir}
	listed := map[string]bool{}
	var sizeOK []ManifestFile
	for _, f := range m.Files {
		listed[f.Name] = true
		st, err := os.Stat(filepath.Join(dir, f.Name))
		switch {
		case err != nil:
			e.Problems = append(e.Problems, f.Name+": "+err.Error())
		case !st.Mode().IsRegular():
			e.Problems = append(e.Problems, f.Name+": not a regular file")
		case st.Size() != f.Size:
			e.Problems = append(e.Problems, fmt.Sprintf("%s: %d bytes, manifest says %d", f.Name, st.Size(), f.Size))
		default:
			sizeOK = append(sizeOK, f)
		}
	}
	names, err := manifestNames(dir)
	if err != nil {
		return fmt.Errorf("k3: verify %s: %w", dir, err)
	}
	for _, n := range names {
		if !listed[n] {
			e.Problems = append(e.Problems, n+": not in the manifest")
		}
	}
	for _, f := range sizeOK {
		size, sum, err := hashFile(filepath.Join(dir, f.Name), progress)
		switch {
		case err != nil:
			e.Problems = append(e.Problems, f.Name+": "+err.Error())
		case size != f.Size:
			e.Problems = append(e.Problems, fmt.Sprintf("%s: changed size while hashed (%d bytes)", f.Name, size))
		case sum != f.SHA256:
			e.Problems = append(e.Problems, fmt.Sprintf("%s: sha256 %s, manifest says %s", f.Name, sum, f.SHA256))
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// hashChunk is the read size of hashFile.
const hashChunk = 8 << 20

// hashFile returns the size and hex SHA-256 of a regular file.
func hashFile(path string, progress Progress) (int64, string, error) {
	f, size, err := regfile.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, hashChunk)
	var done int64
	for {
		n, err := f.Read(buf)
		h.Write(buf[:n])
		done += int64(n)
		if progress != nil && n > 0 {
			progress(filepath.Base(path), done, size)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, "", err
		}
	}
	return done, hex.EncodeToString(h.Sum(nil)), nil
}
