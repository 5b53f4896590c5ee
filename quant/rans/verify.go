package rans

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// ErrMismatch reports a coded tensor that decodes but not to the bytes the
// manifest describes, or a checkpoint whose stamps and manifest disagree.
var ErrMismatch = errors.New("rans: checkpoint does not match its manifest")

// VerifyOptions configures Verify.
type VerifyOptions struct {
	Progress func(Progress) // optional; called from one goroutine at a time
	Workers  int            // decoding goroutines; ≤ 0 means GOMAXPROCS
}

// VerifyReport summarises a successful Verify.
type VerifyReport struct {
	Tensors      int   // coded tensors decoded and compared
	DecodedBytes int64 // their decoded bytes
	RecordBytes  int64 // their stored bytes
}

// Verify checks a repacked checkpoint directory against its manifest: every
// manifest entry is a tensor stamped with the entry's format whose record
// decodes (seal intact) to exactly DecodedBytes bytes with the entry's
// SHA-256; every tensor stamped with a CFS1 weight format is in the
// manifest; no unstamped tensor looks like a record. All problems are
// reported (errors.Join), each matching ErrMismatch, ErrCorrupt, ErrUnstamped
// or ErrManifest; and when the manifest names its model, the checkpoint must
// still be that model (ErrOtherModel, §3.6).
func Verify(dir string, opts VerifyOptions) (*VerifyReport, error) {
	f, err := os.Open(filepath.Join(dir, ManifestFileName))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManifest, err)
	}
	man, err := ParseManifest(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("rans: verify: %w", err)
	}
	defer ck.Close()
	stamps, err := quant.LoadStamps(ck.Metadata())
	if err != nil {
		return nil, fmt.Errorf("rans: verify: %w", err)
	}
	var errs []error
	if man.Model != "" {
		id, err := identify(dir, ck)
		if err == nil {
			err = checkModel(man.Model, id)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	listed := make(map[string]bool, len(man.Tensors))
	for _, e := range man.Tensors {
		listed[e.Name] = true
	}
	for _, t := range ck.Tensors() {
		if listed[t.Name] {
			continue
		}
		st, err := Inspect(ck, stamps, t)
		if err != nil {
			errs = append(errs, err)
		} else if st.Coded {
			errs = append(errs, fmt.Errorf("%w: tensor %q is stamped %s but not in the manifest", ErrMismatch, t.Name, st.Format))
		}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu   sync.Mutex
		next int
		rep  VerifyReport
		prog = Progress{Op: "verify", TotalTensors: len(man.Tensors)}
		wg   sync.WaitGroup
	)
	prog.TotalBytes, _ = man.Totals()
	for range min(workers, max(len(man.Tensors), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d Decoder
			var buf []byte
			for {
				mu.Lock()
				if next == len(man.Tensors) {
					mu.Unlock()
					return
				}
				e := man.Tensors[next]
				next++
				mu.Unlock()
				var err error
				buf, err = verifyOne(ck, stamps, e, &d, buf)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					rep.Tensors++
					rep.DecodedBytes += e.DecodedBytes
					rep.RecordBytes += e.RecordBytes
				}
				prog.Tensors++
				prog.Bytes += e.DecodedBytes
				prog.Stored += e.RecordBytes
				if opts.Progress != nil {
					p := prog
					p.Tensor = e.Name
					opts.Progress(p)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &rep, nil
}

// verifyOne decodes one manifest entry's tensor into buf (grown as needed and
// returned for reuse) and compares its digest.
func verifyOne(ck *safetensors.Checkpoint, stamps *quant.Stamps, e ManifestEntry, d *Decoder, buf []byte) ([]byte, error) {
	t, ok := ck.Tensor(e.Name)
	if !ok {
		return buf, fmt.Errorf("%w: tensor %q is in the manifest but not in the checkpoint", ErrMismatch, e.Name)
	}
	st, err := Inspect(ck, stamps, t)
	if err != nil {
		return buf, err
	}
	switch {
	case !st.Coded:
		return buf, fmt.Errorf("%w: tensor %q is in the manifest but not stamped as coded", ErrMismatch, e.Name)
	case st.Format.String() != e.Format:
		return buf, fmt.Errorf("%w: tensor %q is stamped %s, the manifest says %s", ErrMismatch, e.Name, st.Format, e.Format)
	case int64(st.DecodedLen) != e.DecodedBytes || t.Size != e.RecordBytes:
		return buf, fmt.Errorf("%w: tensor %q: record %d bytes declaring %d, the manifest says %d declaring %d",
			ErrMismatch, e.Name, t.Size, st.DecodedLen, e.RecordBytes, e.DecodedBytes)
	}
	rec, err := ck.Bytes(t)
	if err != nil {
		return buf, fmt.Errorf("rans: verify: %w", err)
	}
	if cap(buf) < st.DecodedLen {
		buf = make([]byte, st.DecodedLen)
	}
	out := buf[:st.DecodedLen]
	if err := d.DecodeInto(out, rec); err != nil {
		return buf, fmt.Errorf("rans: verify %q: %w", e.Name, err)
	}
	sum := sha256.Sum256(out)
	if got := hex.EncodeToString(sum[:]); got != e.SHA256 {
		return buf, fmt.Errorf("%w: tensor %q decodes to sha256 %s, the manifest says %s", ErrMismatch, e.Name, got, e.SHA256)
	}
	return buf, nil
}
