package safetensors

import (
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Limits of §7.3.
const (
	// MaxHeaderSize is the largest header length a reader accepts.
	MaxHeaderSize = 100_000_000
	// MaxRank is the largest number of dimensions a tensor may have.
	MaxRank = 8
)

// Header is one parsed and validated shard header.
type Header struct {
	// Metadata is the __metadata__ object, or nil when absent.
	Metadata map[string]string
	// Tensors in data-offset order. Offsets are absolute file offsets
	// (8 + header length + begin).
	Tensors []Tensor
	// DataOffset is 8 + header length: where the data section starts.
	DataOffset int64
}

// entry is the raw form of one header entry, before sorting. It holds no
// pointers (the name is a span of the header, or an index into the list of
// names that had escapes) so the garbage collector never scans the entries
// of a 500k-tensor open.
type entry struct {
	name       span
	hash       uint64
	begin, end int64
	shapeOff   int32
	rank       uint8
	dtype      DType
	pos        int32 // header offset of the key, for error messages
}

// ParseHeader validates the header bytes of one file (the N bytes after the
// length prefix) against a data section of dataLen bytes, applying every rule
// of §7.3. file only labels errors (the tensors' File is left empty).
// Nothing returned aliases hdr.
func ParseHeader(file string, hdr []byte, dataLen int64) (*Header, error) {
	p, err := parseHeader(file, hdr, dataLen, maphash.MakeSeed(), true)
	if err != nil {
		return nil, err
	}
	h := &Header{Metadata: p.metadata, DataOffset: p.dataOffset, Tensors: make([]Tensor, len(p.entries))}
	p.fill(h.Tensors, "", 0)
	return h, nil
}

// parsed is one validated header in a form without pointers into the Go
// heap apart from a few small fields: the entries of all 96 K3 shards can
// then be live during a garbage collection without being scanned, and the
// Tensor values (three pointers each) are built in one pass at the end.
type parsed struct {
	names
	entries    []entry // in (begin, end) order
	shapes     []int64
	metadata   map[string]string
	dataOffset int64
}

// fill writes the tensors of p to dst (len(dst) == len(p.entries)).
func (p *parsed) fill(dst []Tensor, file string, shard int32) {
	p.fillIndex(dst, file, shard, nil)
}

// fillIndex is fill that also calls add(k, hash) after writing dst[k], so
// a name table can be built in the same pass over the entries.
//
// The names are copied into one buffer per shard: as substrings of the JSON
// text they would keep all of it alive, about twice their size (at K3, 72 MiB
// of header text for 38 MiB of names, held for as long as the checkpoint).
func (p *parsed) fillIndex(dst []Tensor, file string, shard int32, add func(k int, hash uint64)) {
	n := 0
	for k := range p.entries {
		n += len(p.of(&p.entries[k]))
	}
	buf := make([]byte, 0, n) // never grown, so the strings below stay valid
	for k := range p.entries {
		e := &p.entries[k]
		t := &dst[k]
		name := p.of(e)
		t.Name = ""
		if len(name) > 0 {
			at := len(buf)
			buf = append(buf, name...)
			t.Name = unsafe.String(&buf[at], len(name))
		}
		t.DType = e.dtype
		t.Shape = p.shapes[e.shapeOff : e.shapeOff+int32(e.rank) : e.shapeOff+int32(e.rank)]
		t.File = file
		t.Offset = p.dataOffset + e.begin
		t.Size = e.end - e.begin
		t.shard = shard
		if add != nil {
			add(k, e.hash)
		}
	}
}

// span locates a decoded name: off >= 0 is a byte range of the JSON text
// (a name without escapes); off < 0 selects escaped[-off-1].
type span struct{ off, n int32 }

// names resolves spans.
type names struct {
	hs      string // the JSON text
	escaped []string
}

func (n *names) at(sp span) string {
	if sp.off < 0 {
		return n.escaped[-sp.off-1]
	}
	return n.hs[sp.off : sp.off+sp.n]
}

func (n *names) of(e *entry) string { return n.at(e.name) }

// parseHeader validates one header. dedupe may be false when the caller
// checks name uniqueness itself (Open does, across all shards at once).
func parseHeader(file string, hdr []byte, dataLen int64, seed maphash.Seed, dedupe bool) (*parsed, error) {
	if len(hdr) < 2 {
		return nil, newErr(file, "", -1, ErrHeaderTooSmall, "N = "+strconv.Itoa(len(hdr)))
	}
	if len(hdr) > MaxHeaderSize {
		return nil, newErr(file, "", -1, ErrHeaderTooLarge, "N = "+strconv.Itoa(len(hdr)))
	}
	if dataLen < 0 {
		return nil, newErr(file, "", -1, ErrHeaderBeyondFile, "negative data length")
	}
	sc := newScanner(file, hdr)
	h := &parsed{dataOffset: 8 + int64(len(hdr))}
	// A typical entry takes ~100 header bytes; sizing up front avoids
	// repeated growth on 5,000-tensor shards.
	est := len(hdr)/96 + 1
	entries := make([]entry, 0, est)
	shapes := make([]int64, 0, 2*est)
	sawMeta := false
	h.hs = sc.s
	nm := &h.names
	if !sc.open() {
		return nil, sc.err
	}
	sc.ws()
	if sc.peek() == '}' {
		sc.i++
	} else {
		for {
			sc.ws()
			pos := sc.i
			name, ok := sc.str("")
			if !ok || !sc.expect(':', name) {
				return nil, sc.err
			}
			sc.ws()
			if name == "__metadata__" {
				if sawMeta {
					sc.i = pos
					sc.fail(name, ErrDuplicateKey, "__metadata__ twice")
					return nil, sc.err
				}
				sawMeta = true
				if h.metadata, ok = sc.metadata(); !ok {
					return nil, sc.err
				}
			} else {
				if name == "" {
					sc.i = pos
					sc.fail("", ErrEmptyName, "")
					return nil, sc.err
				}
				e := entry{pos: int32(pos), shapeOff: int32(len(shapes))}
				if sc.lastEscaped {
					nm.escaped = append(nm.escaped, name)
					e.name.off = -int32(len(nm.escaped))
				} else {
					e.name = span{int32(sc.lastStart), int32(len(name))}
				}
				if shapes, ok = sc.tensorEntry(&e, name, shapes); !ok {
					return nil, sc.err
				}
				e.hash = maphash.String(seed, name)
				entries = append(entries, e)
			}
			more, ok := sc.next("")
			if !ok {
				return nil, sc.err
			}
			if !more {
				break
			}
		}
	}
	if !sc.end() {
		return nil, sc.err
	}
	if err := checkEntries(file, entries, nm, shapes, dataLen); err != nil {
		return nil, err
	}
	order, err := sweep(file, entries, nm, dataLen)
	if err != nil {
		return nil, err
	}
	// After the sweep, as in Open, whose check runs across shards once all
	// are parsed: both then report the same error for the same file.
	if dedupe {
		if err := dedupeEntries(file, entries, nm); err != nil {
			return nil, err
		}
	}
	sorted := entries
	if !isIdentity(order) {
		sorted = make([]entry, len(entries))
		for k, j := range order {
			sorted[k] = entries[j]
		}
	}
	h.entries = sorted
	h.shapes = shapes
	return h, nil
}

func isIdentity(order []int32) bool {
	for i, j := range order {
		if int32(i) != j {
			return false
		}
	}
	return true
}

func (sc *scanner) metadata() (map[string]string, bool) {
	const who = "__metadata__"
	if sc.peek() != '{' {
		sc.fail(who, ErrMetadataNotObject, "found "+sc.found())
		return nil, false
	}
	sc.i++
	m := map[string]string{}
	sc.ws()
	if sc.peek() == '}' {
		sc.i++
		return m, true
	}
	for {
		sc.ws()
		pos := sc.i
		k, ok := sc.str(who)
		if !ok || !sc.expect(':', who) {
			return nil, false
		}
		sc.ws()
		if sc.peek() != '"' {
			sc.fail(who, ErrMetadataValue, "key "+strconv.Quote(k)+": found "+sc.found())
			return nil, false
		}
		v, ok := sc.str(who)
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			sc.i = pos
			sc.fail(who, ErrDuplicateKey, strconv.Quote(k))
			return nil, false
		}
		m[strings.Clone(k)] = strings.Clone(v) // not substrings of the text: see parsed.fillIndex
		more, ok := sc.next(who)
		if !ok {
			return nil, false
		}
		if !more {
			return m, true
		}
	}
}

const (
	fieldDType = 1 << iota
	fieldShape
	fieldOffsets
	fieldAll = fieldDType | fieldShape | fieldOffsets
)

// tensorEntry parses {"dtype": .., "shape": [..], "data_offsets": [b, e]}
// in any key order, appending the dimensions to shapes.
func (sc *scanner) tensorEntry(e *entry, name string, shapes []int64) ([]int64, bool) {
	if sc.peek() != '{' {
		sc.fail(name, ErrEntryNotObject, "found "+sc.found())
		return shapes, false
	}
	sc.i++
	seen := 0
	sc.ws()
	if sc.peek() == '}' {
		sc.fail(name, ErrMissingField, "empty entry")
		return shapes, false
	}
	for {
		sc.ws()
		pos := sc.i
		// The three keys nearly always appear verbatim; matching the quoted
		// bytes skips the general string scanner. Any other spelling (for
		// instance with escapes) takes the general path and decodes to the
		// same key.
		bit := sc.knownKey()
		if bit == 0 {
			key, ok := sc.str(name)
			if !ok {
				return shapes, false
			}
			switch key {
			case "dtype":
				bit = fieldDType
			case "shape":
				bit = fieldShape
			case "data_offsets":
				bit = fieldOffsets
			default:
				sc.i = pos
				sc.fail(name, ErrUnknownField, strconv.Quote(key))
				return shapes, false
			}
		}
		if !sc.expect(':', name) {
			return shapes, false
		}
		sc.ws()
		if seen&bit != 0 {
			sc.i = pos
			sc.fail(name, ErrDuplicateKey, strconv.Quote(fieldName(bit)))
			return shapes, false
		}
		seen |= bit
		switch bit {
		case fieldDType:
			if sc.peek() != '"' {
				sc.fail(name, ErrUnknownDType, "dtype is not a string")
				return shapes, false
			}
			p := sc.i
			s, ok := sc.str(name)
			if !ok {
				return shapes, false
			}
			d, known := ParseDType(s)
			if !known {
				sc.i = p
				sc.fail(name, ErrUnknownDType, strconv.Quote(s))
				return shapes, false
			}
			e.dtype = d
		case fieldShape:
			var ok bool
			if shapes, ok = sc.shape(e, name, shapes); !ok {
				return shapes, false
			}
		case fieldOffsets:
			if !sc.offsets(e, name) {
				return shapes, false
			}
		}
		more, ok := sc.next(name)
		if !ok {
			return shapes, false
		}
		if !more {
			break
		}
	}
	if seen != fieldAll {
		sc.fail(name, ErrMissingField, missingFields(seen))
		return shapes, false
	}
	return shapes, true
}

// knownKey consumes `"dtype"`, `"shape"` or `"data_offsets"` written
// without escapes and returns its field bit, or returns 0 and consumes
// nothing.
func (sc *scanner) knownKey() int {
	r := sc.s[sc.i:]
	switch {
	case len(r) >= 7 && r[:7] == `"dtype"`:
		sc.i += 7
		return fieldDType
	case len(r) >= 7 && r[:7] == `"shape"`:
		sc.i += 7
		return fieldShape
	case len(r) >= 14 && r[:14] == `"data_offsets"`:
		sc.i += 14
		return fieldOffsets
	}
	return 0
}

func fieldName(bit int) string {
	switch bit {
	case fieldDType:
		return "dtype"
	case fieldShape:
		return "shape"
	}
	return "data_offsets"
}

func missingFields(seen int) string {
	s := "missing"
	if seen&fieldDType == 0 {
		s += " dtype"
	}
	if seen&fieldShape == 0 {
		s += " shape"
	}
	if seen&fieldOffsets == 0 {
		s += " data_offsets"
	}
	return s
}

func (sc *scanner) shape(e *entry, name string, shapes []int64) ([]int64, bool) {
	if sc.peek() != '[' {
		sc.fail(name, ErrBadShape, "found "+sc.found())
		return shapes, false
	}
	sc.i++
	e.shapeOff = int32(len(shapes))
	sc.ws()
	if sc.peek() == ']' {
		sc.i++
		e.rank = 0
		return shapes, true
	}
	rank := 0
	for {
		v, ok := sc.uint(name, ErrBadShape)
		if !ok {
			return shapes, false
		}
		rank++
		if rank > MaxRank {
			sc.fail(name, ErrRankTooLarge, "more than 8 dimensions")
			return shapes, false
		}
		shapes = append(shapes, v)
		sc.ws()
		switch sc.peek() {
		case ',':
			sc.i++
		case ']':
			sc.i++
			e.rank = uint8(rank)
			return shapes, true
		default:
			sc.fail(name, ErrBadShape, "expected ',' or ']', found "+sc.found())
			return shapes, false
		}
	}
}

func (sc *scanner) offsets(e *entry, name string) bool {
	if sc.peek() != '[' {
		sc.fail(name, ErrBadOffsets, "found "+sc.found())
		return false
	}
	sc.i++
	var v [2]int64
	for k := 0; k < 2; k++ {
		sc.ws()
		if sc.peek() == ']' {
			sc.fail(name, ErrBadOffsets, "fewer than two offsets")
			return false
		}
		x, ok := sc.uint(name, ErrBadOffsets)
		if !ok {
			return false
		}
		v[k] = x
		sc.ws()
		want := byte(',')
		if k == 1 {
			want = ']'
		}
		if sc.peek() != want {
			sc.fail(name, ErrBadOffsets, "expected exactly two offsets, found "+sc.found())
			return false
		}
		sc.i++
	}
	if v[0] > v[1] {
		sc.fail(name, ErrBadOffsets, "begin "+strconv.FormatInt(v[0], 10)+" > end "+strconv.FormatInt(v[1], 10))
		return false
	}
	e.begin, e.end = v[0], v[1]
	return true
}

// checkEntries applies rules 5 and 6.
func checkEntries(file string, entries []entry, nm *names, shapes []int64, dataLen int64) error {
	for i := range entries {
		e := &entries[i]
		shape := shapes[e.shapeOff : e.shapeOff+int32(e.rank)]
		_, nb, err := byteSize(e.dtype, shape)
		if err != nil {
			return newErr(file, nm.of(e), int64(e.pos), err, e.dtype.String()+" "+fmtShape(shape))
		}
		if nb != e.end-e.begin {
			return newErr(file, nm.of(e), int64(e.pos), ErrSizeMismatch,
				e.dtype.String()+" "+fmtShape(shape)+" needs "+strconv.FormatInt(nb, 10)+
					" bytes, data_offsets span "+strconv.FormatInt(e.end-e.begin, 10))
		}
		if e.end > dataLen {
			return newErr(file, nm.of(e), int64(e.pos), ErrDataBeyondFile,
				"end "+strconv.FormatInt(e.end, 10)+" > data length "+strconv.FormatInt(dataLen, 10))
		}
	}
	return nil
}

// dedupeEntries refuses two entries with the same decoded name (rule 8
// within one file; the scanner has already decoded escapes, so "a" and
// "\u0061" collide here).
func dedupeEntries(file string, entries []entry, nm *names) error {
	if len(entries) < 2 {
		return nil
	}
	t := newTable(len(entries))
	for i := range entries {
		name := nm.of(&entries[i])
		if j, ok := t.insert(entries[i].hash, int32(i), func(k int32) bool { return nm.of(&entries[k]) == name }); !ok {
			return newErr(file, name, int64(entries[i].pos), ErrDuplicateKey,
				"also at header byte "+strconv.Itoa(int(entries[j].pos)))
		}
	}
	return nil
}

// sweep applies rule 7 and returns the entries' indices in (begin, end)
// order.
func sweep(file string, entries []entry, nm *names, dataLen int64) ([]int32, error) {
	order := make([]int32, len(entries))
	sorted := true
	for i := range order {
		order[i] = int32(i)
		if i > 0 && less(&entries[i], &entries[i-1]) {
			sorted = false
		}
	}
	if !sorted {
		slices.SortStableFunc(order, func(a, b int32) int {
			ea, eb := &entries[a], &entries[b]
			switch {
			case less(ea, eb):
				return -1
			case less(eb, ea):
				return 1
			}
			return 0
		})
	}
	var cur int64
	var prev string
	for _, j := range order {
		e := &entries[j]
		if e.begin < cur {
			// A name given twice with the same span overlaps itself; the
			// duplicate is the fault to report, so look for one first.
			if err := dedupeEntries(file, entries, nm); err != nil {
				return nil, err
			}
			return nil, newErr(file, nm.of(e), int64(e.pos), ErrOverlap,
				"span ["+strconv.FormatInt(e.begin, 10)+", "+strconv.FormatInt(e.end, 10)+") overlaps "+strconv.Quote(prev)+" ending at "+strconv.FormatInt(cur, 10))
		}
		if e.begin > cur {
			return nil, newErr(file, nm.of(e), int64(e.pos), ErrGap,
				"span starts at "+strconv.FormatInt(e.begin, 10)+", previous data ends at "+strconv.FormatInt(cur, 10))
		}
		cur = e.end
		prev = nm.of(e)
	}
	if cur != dataLen {
		return nil, newErr(file, "", -1, ErrTrailingBytes,
			"tensors end at "+strconv.FormatInt(cur, 10)+", data section is "+strconv.FormatInt(dataLen, 10)+" bytes")
	}
	return order, nil
}

func less(a, b *entry) bool {
	return a.begin < b.begin || (a.begin == b.begin && a.end < b.end)
}

func fmtShape(s []int64) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
