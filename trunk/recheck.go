package trunk

import (
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3/storage"
)

// castagnoli is CRC-32C, which amd64 and arm64 compute in hardware at many GB/s: cheap next to
// the read it checks.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rechecks are the counters of the per-read piece checks (§8.6), kept apart from Store.mu so the
// check runs outside it.
type rechecks struct {
	bytes, nanos atomic.Int64
}

// The comparison of a streamed piece with its first read sums one page of every sampleStride
// bytes: checking every byte cost a fifth of a decode step at the floor (the pieces come from
// the page cache at memory speed, and CRC-32C runs at about 12 GB/s on one core), and what the
// per-pass identity checks (§7.7) cannot see is a rewrite that restores the metadata, which a
// copy, rsync or dd of other weights does not make smaller than a sample's stride.
const (
	samplePage   = 4 << 10
	sampleStride = 64 << 10
)

// sampledSum is the CRC-32C of the first samplePage bytes of every sampleStride of data.
func sampledSum(data []byte) (sum uint32, n int) {
	for off := 0; off < len(data); off += sampleStride {
		page := data[off:min(off+samplePage, len(data))]
		sum = crc32.Update(sum, castagnoli, page)
		n += len(page)
	}
	return sum, n
}

// recheck compares a streamed piece's bytes with its first read (§8.6): the first fill of a
// piece records the CRC-32C of one page in every 64 KiB of them (sampledSum) — for a packed
// layer right after its run passed the sha256 of trunk.json — and every later fill must give
// the same. A file rewritten in place since then, whatever its metadata says, fails the read
// with a *ReadError naming the file and matching storage.ErrChanged. Fills of one piece never
// overlap (a piece is in at most one slot), and Store.mu orders one fill before the next.
func (s *Store) recheck(item int, p *piece, data []byte) error {
	if s.opts.NoRecheck {
		return nil
	}
	t0 := time.Now()
	sum, n := sampledSum(data)
	s.rechecks.bytes.Add(int64(n))
	s.rechecks.nanos.Add(int64(time.Since(t0)))
	if !p.summed {
		p.sum, p.summed = sum, true
		return nil
	}
	if sum != p.sum {
		return &ReadError{Item: item, Tensor: p.label(), File: p.f.path, Offset: p.off, Len: p.n,
			Err: fmt.Errorf("%w: the bytes differ from their first read (CRC-32C %08x, then %08x)", storage.ErrChanged, sum, p.sum)}
	}
	return nil
}
