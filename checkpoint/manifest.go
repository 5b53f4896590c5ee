package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/k3-project/k3/safetensors"
)

// Errors of manifest verification (errors.Is).
var (
	// ErrManifest: a manifest file is malformed.
	ErrManifest = errors.New("checkpoint: malformed manifest")
	// ErrManifestMismatch: a checkpoint file is missing, has another size
	// or another SHA-256 than its manifest says.
	ErrManifestMismatch = errors.New("checkpoint: checkpoint differs from its manifest")
)

// MaxManifestSize bounds a manifest file (a K3 manifest is under 10 KB).
const MaxManifestSize = 1 << 20

// Manifest lists the SHA-256 digests of a checkpoint directory's files, so
// a download can be verified once, completely, before the first run. Its
// text form is sha256sum's ("<64 lower-case hex>  <file name>" per line),
// so `sha256sum -c` reads it too. It covers config.json, the index and the
// tokenizer files (tiktoken.model, tokenizer_config.json) when present, and
// every shard (those the index names, or every *.safetensors file without
// an index).
type Manifest struct {
	Files []ManifestFile
}

// ManifestFile is one entry: a plain file name and its lower-case hex
// SHA-256.
type ManifestFile struct {
	Name   string
	SHA256 string
}

// Progress receives hashing progress: the file being hashed, bytes done in
// it and its size. It may be nil.
type Progress func(file string, done, size int64)

// manifestNames lists the files a manifest covers, in manifest order.
func manifestNames(dir string) ([]string, error) {
	var names []string
	for _, f := range []string{"config.json", safetensors.IndexFileName, "tiktoken.model", "tokenizer_config.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().IsRegular() {
			names = append(names, f)
		}
	}
	var shards []string
	if raw, err := regular.ReadFile(filepath.Join(dir, safetensors.IndexFileName), safetensors.MaxIndexSize); err == nil {
		wm, _, err := safetensors.ParseIndex(raw)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, s := range wm {
			if !seen[s] {
				seen[s] = true
				shards = append(shards, s)
			}
		}
	} else if errors.Is(err, os.ErrNotExist) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				shards = append(shards, e.Name())
			}
		}
	} else {
		return nil, err
	}
	slices.Sort(shards)
	return append(names, shards...), nil
}

// BuildManifest hashes the checkpoint files of dir.
func BuildManifest(dir string, progress Progress) (*Manifest, error) {
	names, err := manifestNames(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: manifest of %s: %w", dir, err)
	}
	m := &Manifest{}
	for _, n := range names {
		sum, err := hashFile(filepath.Join(dir, n), progress)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: manifest of %s: %w", dir, err)
		}
		m.Files = append(m.Files, ManifestFile{Name: n, SHA256: sum})
	}
	return m, nil
}

// WriteManifest hashes dir's checkpoint files and writes the manifest to w.
func WriteManifest(dir string, w io.Writer, progress Progress) error {
	m, err := BuildManifest(dir, progress)
	if err != nil {
		return err
	}
	_, err = w.Write(m.Marshal())
	return err
}

// Marshal encodes m in sha256sum format (ReadManifest reads it back).
func (m *Manifest) Marshal() []byte {
	var b []byte
	for _, f := range m.Files {
		b = append(append(append(append(b, f.SHA256...), "  "...), f.Name...), '\n')
	}
	return b
}

// ReadManifest parses a manifest strictly: at most MaxManifestSize bytes,
// one "<64 lower-case hex><two spaces or space-asterisk><plain file name>"
// per line, no name twice, at least one line.
func ReadManifest(r io.Reader) (*Manifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrManifest, MaxManifestSize)
	}
	m := &Manifest{}
	seen := map[string]bool{}
	text := string(b)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		bad := func(why string) error { return fmt.Errorf("%w: line %d: %s", ErrManifest, n, why) }
		if len(line) < 67 {
			return nil, bad(`expected "<sha256 hex>  <file name>"`)
		}
		sum, sep, name := line[:64], line[64:66], line[66:]
		switch {
		case !isHex(sum) || strings.ToLower(sum) != sum:
			return nil, bad("the digest is not 64 lower-case hex digits")
		case sep != "  " && sep != " *":
			return nil, bad(`the digest must be followed by two spaces or " *"`)
		case name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "/\\\r"):
			return nil, bad(fmt.Sprintf("%q is not a plain file name", name))
		case seen[name]:
			return nil, bad(name + " is listed twice")
		}
		seen[name] = true
		m.Files = append(m.Files, ManifestFile{Name: name, SHA256: sum})
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("%w: no files listed", ErrManifest)
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
	return fmt.Sprintf("checkpoint: %s differs from its manifest: %s", e.Dir, strings.Join(e.Problems, "; "))
}

// Unwrap makes errors.Is(err, ErrManifestMismatch) true.
func (e *ManifestError) Unwrap() error { return ErrManifestMismatch }

// VerifyManifest checks dir against m. It first validates the checkpoint's
// structure without reading tensor data (safetensors.Open: headers, sizes
// against headers, the index), so a truncated shard is named at once and
// not hashed; then it hashes every other file. Files m lists that are
// missing, covered files m does not list, and digest differences are all
// collected in one *ManifestError.
func VerifyManifest(dir string, m *Manifest, progress Progress) error {
	e := &ManifestError{Dir: dir}
	skip := map[string]bool{}
	if ck, err := safetensors.Open(dir); err != nil {
		var se *safetensors.Error
		if errors.As(err, &se) && se.File != "" {
			skip[filepath.Base(se.File)] = true
			e.Problems = append(e.Problems, filepath.Base(se.File)+": "+err.Error())
		} else {
			e.Problems = append(e.Problems, "checkpoint: "+err.Error())
		}
	} else {
		ck.Close()
	}
	names, err := manifestNames(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: verify %s: %w", dir, err)
	}
	covered := map[string]bool{}
	for _, n := range names {
		covered[n] = true
	}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Name] = true
		switch {
		case skip[f.Name]:
		case !covered[f.Name]:
			e.Problems = append(e.Problems, f.Name+": listed in the manifest but not part of the checkpoint (missing or not named by the index)")
		default:
			sum, err := hashFile(filepath.Join(dir, f.Name), progress)
			switch {
			case err != nil:
				e.Problems = append(e.Problems, f.Name+": "+err.Error())
			case sum != f.SHA256:
				e.Problems = append(e.Problems, fmt.Sprintf("%s: changed: sha256 %s, the manifest says %s", f.Name, sum, f.SHA256))
			}
		}
	}
	for _, n := range names {
		if !listed[n] {
			e.Problems = append(e.Problems, n+": not listed in the manifest")
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// hashChunk is the read size of hashFile.
const hashChunk = 8 << 20

// hashFile returns the hex SHA-256 of a regular file.
func hashFile(path string, progress Progress) (string, error) {
	f, size, err := regular.Open(path)
	if err != nil {
		return "", err
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
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
