// Package tokenizer implements tiktoken-style byte-pair-encoding tokenizers:
// the Kimi K2/K2.5/K3 tokenizer (a tiktoken.model rank file plus the
// added_tokens_decoder of tokenizer_config.json, §10) and, on the same
// machinery, OpenAI's cl100k_base and o200k_base encodings built from their
// rank files.
//
// The pre-tokenizer is not a regular-expression engine. Each supported split
// pattern (SplitKimi, SplitO200K, SplitCL100K) is a hand-written scanner over
// code points that reproduces the leftmost-first, backtracking semantics that
// tiktoken's fancy-regex gives the published pattern, including
// `\s+(?!\S)`, Unicode classes (Script=Han, Lu/Lt/Lm/Lo/Ll, M, N, White_Space)
// and case-insensitive contractions. Go's regexp cannot express those
// patterns, and a general backtracking engine would be both slower and a
// source of pathological inputs.
//
// Byte-pair merging uses tiktoken's rule (a piece that is itself a token is
// emitted whole; otherwise repeatedly merge the lowest-ranked adjacent pair,
// leftmost on ties). Pieces of 100 bytes or more use a heap with stale-entry
// skipping, so a megabyte without a split point costs O(n log n), not O(n²).
//
// # Getting an encoding
//
// For Kimi, LoadDir(modelDir) reads a model directory's tiktoken.model and
// tokenizer_config.json (LoadKimi takes the two paths) and returns an
// encoding with the Kimi split rule, the 256 specials at ids N..N+255 and
// the tokenization_kimi.py pipeline;
// enc.Ranks().IsKimiReference() tells whether the rank file is the released
// one (a mismatch is reported, not refused). To reproduce the reference
// tokenizer's encode, call enc.Encode(text, AllowSpecial).
//
// For cl100k_base or o200k_base, the packages tokenizer/cl100k and
// tokenizer/o200k embed the rank files, and tokenizer/bundled finds either by
// name (GetEncoding). For another rank file, load it with LoadRanks and call
// New with SplitCL100K or SplitO200K and the special-token map; the result
// matches tiktoken's ids. NewRanks builds a vocabulary from token bytes in
// code.
//
// Loading is bounded by its input: a rank file above MaxRankFileSize or a
// tokenizer_config.json above MaxConfigFileSize is refused (ErrTooLarge)
// before it is read, a path that is not a regular file is refused without
// blocking, and a rank file crafted so that its tokens collide in the
// lookup table's fixed hash moves the table to a randomly seeded maphash
// once a probe chain passes 256 slots, so loading stays linear.
//
// # Special tokens
//
// Encode takes an explicit Mode. The zero value, NoSpecial, treats special
// names as ordinary text, so user text never turns into control tokens by
// accident. AllowSpecial turns every special name into its id; it is the
// behaviour of the Kimi reference tokenizer (tokenization_kimi.py, whose
// encode allows all specials) and of tiktoken's encode(text,
// allowed_special="all"). RejectSpecial is tiktoken's default: text that
// contains a special name is refused with a *DisallowedSpecialError.
// EncodeWith takes an explicit allowed set as tiktoken does.
//
// # Pipelines
//
// Encodings built with KimiCuts (LoadKimi sets it) follow tokenization_kimi.py:
// the text is sliced into chunks of 400,000 code points, each chunk is cut
// where a run of equal Python str.isspace class exceeds 25,000 code points,
// and each piece is encoded independently (special names are searched per
// piece). Without KimiCuts the whole text is encoded at once, as tiktoken's
// Rust core does; cl100k and o200k use that.
//
// Input must be valid UTF-8; otherwise encoding fails with an error matching
// ErrInvalidUTF8 that carries the byte offset of the first bad byte
// (*InvalidUTF8Error).
//
// # Throughput
//
// EncodeBatch encodes many texts on several goroutines (one text at a time
// per goroutine, results in input order, identical to Encode). Within one
// call, and across the texts of one EncodeBatch worker, the merges of
// repeated pieces are remembered in a bounded memo (which stops serving
// CJK runs or words when it rarely hits them), and the ranks of single
// 3-byte characters (most of CJK) come from a dense table built by New;
// neither changes an id, and the memo is gone when the call returns.
//
// Pieces outside ASCII merge by characters: a 2- or 3-byte character whose
// own merges the vocabulary proves cannot interact with its neighbours
// (tables built from the ranks on the first piece outside ASCII, a few
// milliseconds; see chars.go for the argument) enters
// the merge as one part that completes in one step, or starts complete, so
// a run of k CJK characters merges in about k parts instead of 3k. The
// result is the byte-level merge's, id for id (tested against a direct
// statement of §10.5 on every fixture vocabulary and fuzzed on
// vocabularies the fuzzer writes).
//
// # Decoding
//
// DecodeBytes concatenates token bytes and refuses unknown ids. Decode
// converts to a string the way Python's bytes.decode("utf-8", "replace")
// does: one U+FFFD per maximal ill-formed subpart (not Go's one per byte).
// StreamDecoder emits text incrementally, holding back at most three bytes of
// an incomplete UTF-8 sequence.
//
// This package is standalone: it must never import model packages (config,
// safetensors, quant, attention, moe, or the k3 root package). Besides the
// standard library it uses only internal/fileio/strictjson, which imports nothing
// of k3.
package tokenizer
