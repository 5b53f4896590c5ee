// Package strictjson is a strict RFC 8259 JSON parser for the files the k3
// library reads: config.json, tokenizer_config.json, trunk.json and similar.
//
// encoding/json is lenient in ways that hide broken or hostile files: it
// keeps the last of two duplicate keys, replaces invalid UTF-8 and lone
// surrogate escapes with U+FFFD, and rounds numbers through float64. Each of
// those silently changes what a configuration means, so this package refuses
// them instead:
//
//   - duplicate keys in any object are an error naming the key path;
//   - NaN, Infinity, trailing commas, leading zeros, comments, single quotes
//     and a byte-order mark are syntax errors;
//   - strings must be valid UTF-8 with no raw control characters; escapes are
//     decoded exactly, \uXXXX surrogate pairs are combined and a lone
//     surrogate is refused;
//   - nesting depth and input size are bounded ([Limits]).
//
// The result is a small immutable tree of [Value]s. Objects keep their key
// order. Numbers keep their literal text; [Value.Int64] reads it exactly
// (an integral value written as 1.0 or 1e3 is accepted, 1.5 or an out-of-range
// value is an error, nothing is ever truncated) and [Value.Float64] reads it
// as a finite float64. Every error is an [*Error] carrying the byte offset and
// wrapping one of the sentinel errors, so callers can branch with errors.Is.
//
// [Unquote] and [AppendQuote] decode and encode single JSON string literals
// with the same rules, for code that scans JSON itself.
//
// This package imports only the standard library and nothing of k3.
package strictjson
