package rans

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/k3-project/k3/quant"
)

// ManifestFileName is the manifest Repack writes into the output directory.
const ManifestFileName = "k3-cfs1-manifest.json"

// ManifestVersion is the only manifest version this package reads.
const ManifestVersion = 1

// MaxManifestSize bounds the manifest file read by ParseManifest.
const MaxManifestSize = 64 << 20

// ErrManifest reports a manifest that cannot be read or is malformed.
var ErrManifest = errors.New("rans: bad manifest")

// Manifest lists every coded tensor of a repacked checkpoint with the
// SHA-256 of its decoded bytes (which are the source tensor's bytes).
type Manifest struct {
	Version int `json:"version"`
	// Model is the source model's identity (§3.6), 64 lowercase hex digits, which the coded copy
	// keeps: CheckModel and Verify refuse a copy whose dense tensors no longer have it. "" when
	// the source has no config.json, or the manifest predates identities.
	Model   string          `json:"model,omitempty"`
	Tensors []ManifestEntry `json:"tensors"` // sorted by name, unique
}

// ManifestEntry describes one coded tensor.
type ManifestEntry struct {
	Name         string  `json:"name"`
	Format       string  `json:"format"` // the stamped container, e.g. "mxfp4-cfs1"
	DType        string  `json:"dtype"`  // the source tensor's dtype
	Shape        []int64 `json:"shape"`  // the source tensor's shape
	DecodedBytes int64   `json:"decoded_bytes"`
	RecordBytes  int64   `json:"record_bytes"`
	SHA256       string  `json:"sha256"` // lowercase hex of the decoded bytes
}

// Totals returns the decoded and stored byte counts over all entries.
func (m *Manifest) Totals() (decoded, record int64) {
	for _, e := range m.Tensors {
		decoded += e.DecodedBytes
		record += e.RecordBytes
	}
	return decoded, record
}

func (m *Manifest) encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("rans: manifest: %w", err)
	}
	return b.Bytes(), nil
}

// ParseManifest reads a manifest of at most MaxManifestSize bytes and checks
// it: known fields only, version 1, names non-empty, unique and sorted,
// formats CFS1 weight containers, sizes positive (a record at most 9 bytes
// longer than its decoded bytes), digests 64 lowercase hex digits.
func ParseManifest(r io.Reader) (*Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrManifest, MaxManifestSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the object", ErrManifest)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrManifest, m.Version, ManifestVersion)
	}
	if m.Model != "" && (len(m.Model) != 64 || m.Model != hexLower(m.Model)) {
		return nil, fmt.Errorf("%w: model %q is not 64 lowercase hex digits", ErrManifest, m.Model)
	}
	for i, e := range m.Tensors {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: tensor %q: %s", ErrManifest, e.Name, fmt.Sprintf(format, a...))
		}
		if e.Name == "" {
			return nil, fmt.Errorf("%w: entry %d has no name", ErrManifest, i)
		}
		if i > 0 && m.Tensors[i-1].Name >= e.Name {
			return nil, bad("names not sorted and unique (after %q)", m.Tensors[i-1].Name)
		}
		f, err := quant.ParseFormat(e.Format)
		if err != nil || f.Base() == f || f == quant.MXFP4ScaleCFS1 || f == quant.Int4Rans256G0 {
			return nil, bad("format %q is not a CFS1 weight container", e.Format)
		}
		if e.DecodedBytes <= 0 || e.RecordBytes <= 0 || e.RecordBytes > e.DecodedBytes+headerLen || e.DecodedBytes > 1<<32-1 {
			return nil, bad("sizes decoded %d, record %d out of range", e.DecodedBytes, e.RecordBytes)
		}
		if len(e.SHA256) != 64 || e.SHA256 != hexLower(e.SHA256) {
			return nil, bad("sha256 %q is not 64 lowercase hex digits", e.SHA256)
		}
		if e.DType == "" || len(e.Shape) == 0 || slices.ContainsFunc(e.Shape, func(d int64) bool { return d <= 0 }) {
			return nil, bad("dtype %q shape %v invalid", e.DType, e.Shape)
		}
	}
	return &m, nil
}

func hexLower(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(b)
}
