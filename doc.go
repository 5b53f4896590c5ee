// Package k3 runs the Kimi K3 text model (93 decoder layers of Kimi Delta Attention and gated MLA
// with block Attention Residuals and Stable LatentMoE feed-forward blocks) on the CPU, in pure Go,
// reproducing the PyTorch reference ("the oracle") to within 1e-5 per logit with identical greedy
// tokens.
//
// # Using it
//
// Open binds a checkpoint directory in the released layout (config.json, safetensors shards,
// model.safetensors.index.json); the weights stay in the page cache through memory-mapped shards.
// A Model is shared; each sequence gets a Session holding its KDA recurrent states and
// convolution tails and its MLA latent caches:
//
//	m, err := k3.Open(dir, k3.WithThreads(8))
//	s := m.NewSession()
//	err = s.Prefill(ctx, promptIDs)   // any number of positions, in any number of calls
//	next, err := s.Next()             // greedy pick from the last position's logits
//	err = s.Step(ctx, next)           // one more position
//
// Model.Generate wraps that loop as an iterator, in incremental or full-recompute mode;
// Model.Forward returns every position's logits (teacher forcing). Snapshot, Restore and Clone
// copy a session's state exactly. Synthesize writes random checkpoints of a few geometries
// (Geometries), including the real model's shapes as sparse files, so everything can be tried
// without the 1.56 TB download.
//
// # Generation
//
// GenerateOptions adds to greedy decoding a Sampler (temperature, top-k, top-p, min-p,
// repetition/frequency/presence penalties, a seed; xoshiro256** and a fixed stage order, so a
// seed gives the same tokens on every machine, thread count and build), stop strings matched on
// decoded bytes across token boundaries (the text never includes a stop string or a released
// part of one), MaxContext, and exact prompt-lookup speculative decoding (Speculative: greedy
// output identical to plain decoding by construction, sampling by the rejection rule); OnDone
// reports a StopReason. Session.Save and LoadSession write and read a conversation's complete
// state (K3ST version 2: the C engine's header fields plus configuration and tensor-set digests,
// the latent MLA cache form and CRC-32C checksums), so a second turn continues bit-identically
// without re-reading the history.
//
// # Guarantees
//
// Logits are bit-identical across thread counts, SIMD and pure-Go kernels (-tags purego), full
// recompute versus incremental decoding, chunked versus one-call prefill, and snapshot/restore
// (SPEC §5.6, "E1"), because every reduction has a fixed partition and order. Against the oracle
// fixtures (SPEC §13.2) greedy and teacher-forced tokens agree exactly and logits within 1e-5.
//
// Bad input never panics: token ids outside the vocabulary are *TokenError, a checkpoint that
// lacks or mis-shapes tensors is refused with one *BindError listing all of them, a failure inside
// a layer is a *ForwardError (after which the session reports ErrBroken until Reset or Restore).
//
// # Imports
//
// The root package composes config, safetensors, quant, attention, moe and the internal kernels.
// Those packages never import it; safetensors, tokenizer and quant import nothing model-specific.
package k3
