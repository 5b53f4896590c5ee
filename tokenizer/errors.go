package tokenizer

import (
	"errors"
	"fmt"
)

// ErrInvalidUTF8 is matched (errors.Is) by the *InvalidUTF8Error returned when
// the text to encode is not valid UTF-8.
var ErrInvalidUTF8 = errors.New("tokenizer: invalid UTF-8")

// ErrUnknownID is matched by the *UnknownIDError returned when an id is
// neither a rank nor a special token id.
var ErrUnknownID = errors.New("tokenizer: unknown token id")

// ErrDisallowedSpecial is matched by the *DisallowedSpecialError returned
// when the text contains a special name that the policy forbids.
var ErrDisallowedSpecial = errors.New("tokenizer: disallowed special token in text")

// ErrTooLarge is matched when a rank file or tokenizer_config.json exceeds
// its size limit (MaxRankFileSize, MaxConfigFileSize).
var ErrTooLarge = errors.New("tokenizer: file larger than the limit")

// ErrRankFile is matched by every *RankFileError.
var ErrRankFile = errors.New("tokenizer: invalid rank file")

// ErrSpecials is matched by every error about the special-token set or the
// tokenizer_config.json file.
var ErrSpecials = errors.New("tokenizer: invalid special tokens")

// InvalidUTF8Error reports the byte offset of the first byte that does not
// start a valid UTF-8 sequence.
type InvalidUTF8Error struct {
	Offset int
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("tokenizer: invalid UTF-8 at byte offset %d", e.Offset)
}

// Is reports whether target is ErrInvalidUTF8.
func (e *InvalidUTF8Error) Is(target error) bool { return target == ErrInvalidUTF8 }

// UnknownIDError names an id that cannot be decoded and its index in the
// input slice.
type UnknownIDError struct {
	ID    int
	Index int
}

func (e *UnknownIDError) Error() string {
	return fmt.Sprintf("tokenizer: unknown token id %d at index %d", e.ID, e.Index)
}

// Is reports whether target is ErrUnknownID.
func (e *UnknownIDError) Is(target error) bool { return target == ErrUnknownID }

// DisallowedSpecialError names the special token found in the text and its
// byte offset.
type DisallowedSpecialError struct {
	Name   string
	Offset int
}

func (e *DisallowedSpecialError) Error() string {
	return fmt.Sprintf("tokenizer: text contains special token %q at byte offset %d, which the policy does not allow", e.Name, e.Offset)
}

// Is reports whether target is ErrDisallowedSpecial.
func (e *DisallowedSpecialError) Is(target error) bool { return target == ErrDisallowedSpecial }

// RankFileError is a refusal of a tiktoken rank file. Line is 1-based; it is
// 0 for whole-file conditions (such as a missing single-byte token).
type RankFileError struct {
	Line int
	Msg  string
}

func (e *RankFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("tokenizer: rank file line %d: %s", e.Line, e.Msg)
	}
	return "tokenizer: rank file: " + e.Msg
}

// Is reports whether target is ErrRankFile.
func (e *RankFileError) Is(target error) bool { return target == ErrRankFile }

// SpecialsError is a refusal of the special-token set.
type SpecialsError struct {
	Msg string
}

func (e *SpecialsError) Error() string { return "tokenizer: special tokens: " + e.Msg }

// Is reports whether target is ErrSpecials.
func (e *SpecialsError) Is(target error) bool { return target == ErrSpecials }
