package safetensors

import (
	"errors"
	"strconv"
	"strings"

	"github.com/k3-project/k3/storage"
)

// Sentinel errors. Every validation failure wraps exactly one of them in an
// *Error (or, for lookups, a *MissingTensorError), so callers branch with
// errors.Is and read the file and tensor with errors.As.
var (
	// File framing (§7.3 rule 1).
	ErrFileTooSmall     = errors.New("safetensors: file shorter than the 8-byte header length")
	ErrHeaderTooSmall   = errors.New("safetensors: header length below 2")
	ErrHeaderTooLarge   = errors.New("safetensors: header length above 100,000,000")
	ErrHeaderBeyondFile = errors.New("safetensors: header length exceeds the file")

	// Header JSON (rule 2).
	ErrInvalidUTF8     = errors.New("safetensors: header is not valid UTF-8")
	ErrSyntax          = errors.New("safetensors: header is not strict JSON")
	ErrNotObject       = errors.New("safetensors: header does not start with '{'")
	ErrTrailingGarbage = errors.New("safetensors: non-white-space bytes after the header object")
	ErrDuplicateKey    = errors.New("safetensors: duplicate JSON key")
	ErrInvalidEscape   = errors.New("safetensors: invalid string escape")
	ErrLoneSurrogate   = errors.New("safetensors: lone UTF-16 surrogate in string escape")

	// __metadata__ (rule 3).
	ErrMetadataNotObject = errors.New("safetensors: __metadata__ is not an object")
	ErrMetadataValue     = errors.New("safetensors: __metadata__ value is not a string")

	// Tensor entries (rules 4-6).
	ErrEmptyName        = errors.New("safetensors: empty tensor name")
	ErrEntryNotObject   = errors.New("safetensors: tensor entry is not an object")
	ErrMissingField     = errors.New("safetensors: tensor entry lacks dtype, shape or data_offsets")
	ErrUnknownField     = errors.New("safetensors: tensor entry has a key other than dtype, shape, data_offsets")
	ErrUnknownDType     = errors.New("safetensors: unknown dtype")
	ErrBadShape         = errors.New("safetensors: shape is not an array of integers")
	ErrRankTooLarge     = errors.New("safetensors: rank above 8")
	ErrBadInteger       = errors.New("safetensors: negative, fractional or malformed integer")
	ErrIntegerOverflow  = errors.New("safetensors: integer overflows int64")
	ErrBadOffsets       = errors.New("safetensors: data_offsets is not two integers with begin <= end")
	ErrNumelOverflow    = errors.New("safetensors: element count or byte size overflows")
	ErrSubByteAlignment = errors.New("safetensors: sub-byte tensor does not fill whole bytes")
	ErrSizeMismatch     = errors.New("safetensors: shape and dtype disagree with data_offsets length")
	ErrDataBeyondFile   = errors.New("safetensors: tensor data runs past the end of the file")

	// Span sweep (rule 7) and uniqueness (rule 8).
	ErrOverlap         = errors.New("safetensors: tensor data spans overlap")
	ErrGap             = errors.New("safetensors: gap between tensor data spans")
	ErrTrailingBytes   = errors.New("safetensors: bytes after the last tensor in the data section")
	ErrDuplicateTensor = errors.New("safetensors: tensor name present in two shards")

	// Directories and the index file (§7.4).
	ErrNoShards           = errors.New("safetensors: no *.safetensors file in directory")
	ErrIndexTooLarge      = errors.New("safetensors: index file above 256 MiB")
	ErrIndexFormat        = errors.New("safetensors: index file lacks the weight_map object or has a malformed field")
	ErrIndexShardName     = errors.New("safetensors: index names a shard that is not a plain file name")
	ErrIndexShardMissing  = errors.New("safetensors: index names a shard file that does not exist")
	ErrIndexTensorMissing = errors.New("safetensors: index names a tensor its shard does not hold")
	ErrIndexWrongShard    = errors.New("safetensors: tensor found in a different shard than the index names")
	ErrIndexUnlisted      = errors.New("safetensors: shard holds a tensor the index does not list")
	ErrIndexTotalSize     = errors.New("safetensors: index total_size differs from the sum of tensor sizes")

	// Access.
	ErrNotFound      = errors.New("safetensors: tensor not found")
	ErrShortRead     = storage.ErrShortRead
	ErrOutOfRange    = errors.New("safetensors: read outside the tensor")
	ErrClosed        = errors.New("safetensors: checkpoint closed")
	ErrForeignTensor = errors.New("safetensors: tensor does not belong to this checkpoint")
	ErrNotWidenable  = errors.New("safetensors: dtype cannot be widened to float32")
	ErrUnaligned     = storage.ErrUnaligned
	ErrLength        = errors.New("safetensors: source and destination lengths disagree")
	// ErrNotRegular: a shard or index path is a FIFO, device, socket or
	// directory; opening or reading it could block forever.
	ErrNotRegular = errors.New("safetensors: not a regular file")
	// ErrFault: a mapped read faulted (SIGBUS), almost always because the
	// shard was truncated while mapped. Guard returns it.
	ErrFault = errors.New("safetensors: fault reading mapped tensor data")

	// Writer.
	ErrInvalidName = errors.New("safetensors: tensor name is empty, not UTF-8 or reserved")
	ErrDataLength  = errors.New("safetensors: tensor data length differs from shape and dtype")
)

// Error reports a failure tied to a file and, when known, a tensor.
// Err is one of the package's sentinel errors.
type Error struct {
	File   string // path of the shard or index file
	Tensor string // tensor name, or "" when the failure is not about one tensor
	Pos    int64  // byte offset in the header JSON, or -1
	Err    error  // sentinel
	Detail string // free text: the offending values
}

// Error formats the sentinel, file, tensor, header position and detail.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.File != "" {
		b.WriteString(": file ")
		b.WriteString(e.File)
	}
	if e.Tensor != "" {
		b.WriteString(": tensor ")
		b.WriteString(strconv.Quote(e.Tensor))
	}
	if e.Pos >= 0 {
		b.WriteString(": header byte ")
		b.WriteString(strconv.FormatInt(e.Pos, 10))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// ShardState says why a shard did not provide a tensor (§7.4).
type ShardState uint8

const (
	// NoIndex: the checkpoint has no index file, so no shard is expected.
	NoIndex ShardState = iota
	// NotReferenced: an index exists but does not list the tensor.
	NotReferenced
	// ShardAbsent: the index names a shard that is not open.
	ShardAbsent
	// ShardLacking: the named shard is open but does not hold the tensor.
	ShardLacking
)

// String describes the state in words.
func (s ShardState) String() string {
	switch s {
	case NoIndex:
		return "no index"
	case NotReferenced:
		return "not referenced by the index"
	case ShardAbsent:
		return "shard absent"
	case ShardLacking:
		return "shard present but lacking the tensor"
	}
	return "ShardState(" + strconv.Itoa(int(s)) + ")"
}

// MissingTensorError describes a tensor that a caller required but the
// checkpoint does not provide. It wraps ErrNotFound.
type MissingTensorError struct {
	Name  string
	Shard string // shard file named by the index, or ""
	State ShardState
}

// Error names the tensor and, with an index, the shard expected to hold it.
func (e *MissingTensorError) Error() string {
	s := "safetensors: tensor " + strconv.Quote(e.Name) + " not found"
	if e.Shard != "" {
		s += " (index names shard " + e.Shard + ": " + e.State.String() + ")"
	} else {
		s += " (" + e.State.String() + ")"
	}
	return s
}

// Unwrap returns ErrNotFound.
func (e *MissingTensorError) Unwrap() error { return ErrNotFound }

func newErr(file, tensor string, pos int64, sentinel error, detail string) *Error {
	return &Error{File: file, Tensor: tensor, Pos: pos, Err: sentinel, Detail: detail}
}
