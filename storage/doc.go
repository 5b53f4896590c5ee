// Package storage is the one seam through which the library reads weight
// files: checkpoint shards, the packed trunk and routed experts.
//
// Start with Opener and Open. A File is what an Opener returns: read-only
// random access, Close, and Stat for the size (an *os.File is one, and so
// is a file that injects faults in tests). Open, the default Opener, opens
// a regular file without blocking and refuses anything else, so a FIFO in
// place of a shard cannot hang a read.
//
// A Reader does the aligned reads of §7.5 on a File: NewReader reads
// through a second, O_DIRECT descriptor when the File is an *os.File and
// the file system allows it, and through the File's own ReadAt otherwise
// (Mode and FallbackReason say which), so whatever an Opener returns is
// what every read sees. Buffers for direct reads come from AllocAligned;
// Window gives the 4096-aligned span a read covers. ReadFull is the plain
// counterpart: chunked, EINTR-safe, and a short read is an error
// (ErrShortRead), never partial data.
//
// A Watch is an Opener that records each file's Identity (inode, size,
// mtime, ctime) when first opened; its Check, run by a model before and
// after each forward pass, reports a file that is no longer what was opened
// as a *ChangedError (§7.7).
//
// This package imports only the standard library, x/sys and internal
// helpers.
package storage
