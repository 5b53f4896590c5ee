// Package safetensors reads and writes the safetensors tensor format with
// the hardening §7 requires of a reader that opens multi-terabyte
// checkpoints from untrusted sources.
//
// Open takes one file or a checkpoint directory. A directory with
// model.safetensors.index.json is opened through the index, which must agree
// exactly with the shards; without one, every *.safetensors file is opened in
// byte-wise name order. Every header is validated before Open returns: the
// length prefix (by subtraction, never 8+N), strict JSON (UTF-8, no NaN, no
// trailing commas, no duplicate keys, exact escapes with surrogate pairs),
// known dtypes, rank ≤ 8, overflow-checked sizes, and a span sweep that
// makes the tensors tile the data section exactly. Each failure is a
// distinct sentinel error (ErrGap, ErrOverlap, ...) wrapped in an *Error that
// names the file and tensor.
//
// Tensor bytes are reached three ways: Bytes returns a zero-copy view of a
// shared read-only mapping; ReadAt does buffered reads that loop in chunks
// of at most 1 GiB and treat a short read as an error; ReadDirect does
// 4096-aligned O_DIRECT reads into off-heap buffers (storage.Reader,
// storage.AllocAligned), falling back to buffered reads where the file
// system refuses O_DIRECT. Advise forwards madvise/fadvise hints for streaming.
// ReadF32 and the standalone converters (BF16ToF32, F16ToF32, ...) widen
// elements to float32 exactly.
//
// Files that change or fail underneath: shard paths that are not regular
// files (a FIFO would block forever) are refused with ErrNotRegular without
// blocking; pread-based reads report a file that ends early as ErrShortRead
// and never return a partly filled buffer; a shard is re-checked for size
// when it is first mapped, CheckSizes re-checks every shard on demand, and
// Guard turns the SIGBUS of a view into a truncated mapping into ErrFault
// naming the shard. After the header's closing brace any JSON white space
// is accepted as padding, as the reference reader does.
//
// WriteFile and WriteSharded produce deterministic files that pass the same
// validation; tensors without data become sparse holes, and Fill streams a
// tensor's bytes from a callback.
//
// The name index of a 500k-tensor checkpoint (about 78 MB of header JSON)
// is built by a hand-written scanner on GOMAXPROCS goroutines, with names
// aliasing the header bytes and one shape array per shard, because
// encoding/json is both too slow and too lenient for this.
//
// The package runs on Unix systems (mmap through golang.org/x/sys/unix;
// O_DIRECT on Linux, buffered reads elsewhere). It is standalone: it must
// never import anything model-specific (config, attention, moe, quant, the
// k3 root package), so any Go program can use it alone.
package safetensors
