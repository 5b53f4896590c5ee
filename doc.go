// Package k3 runs the Kimi K3 text model (93 decoder layers of Kimi Delta Attention and gated MLA
// with block Attention Residuals and Stable LatentMoE feed-forward blocks) on the CPU, in pure Go,
// reproducing the PyTorch reference ("the oracle") to within 1e-5 per logit with identical greedy
// tokens, at any memory budget.
//
// # Using it
//
// Start with Open and Model.Generate. Open binds a checkpoint directory in the released layout
// (config.json, safetensors shards, model.safetensors.index.json); options choose how much memory
// the weights may take. PlanFor shows, from the headers alone, what a set of options will cost
// (Plan: the dense-weight store, the expert cache and what each session holds) and refuses a
// budget below the floor, exactly as Open would:
//
//	opts := []k3.Option{k3.WithTrunkBudget(8 << 30), k3.WithCacheBudget(32 << 30)}
//	plan, err := k3.PlanFor(dir, opts...)
//	m, err := k3.Open(dir, opts...)
//	for id, err := range m.Generate(ctx, prompt, k3.GenerateOptions{MaxTokens: 64, Tokens: enc, OnText: print}) {
//		...
//	}
//
// Without budgets every shard is memory-mapped and the page cache holds what is touched, except
// routed experts whose stamps say they are entropy-coded (a checkpoint written by quant/rans
// Repack): those are served by the expert cache with budget 0 (every expert read and decoded
// into scratch, none kept), which the Plan shows, unless WithCacheBudget gives a budget. Results
// are bit-identical at every budget.
//
// A Model is shared; each sequence gets a Session holding its KDA recurrent states and
// convolution tails and its MLA latent caches. Session.Prefill, Step and Generate carry a
// conversation forward; Snapshot and Restore copy its state exactly; Save and LoadSession
// write and read it as a K3ST file (version 2: the C engine's header fields plus configuration
// and tensor-set digests, the latent MLA cache form and CRC-32C checksums), so a second turn
// continues bit-identically without re-reading the history. Model.Forward returns every
// position's logits (teacher forcing).
//
// # Generation
//
// Model.Generate and Session.Generate take one GenerateOptions: greedy decoding by default, or a
// sampler of package sample (temperature, top-k, top-p, min-p, penalties, a seeded random
// stream that gives the same tokens on every machine, thread count and build); stop ids and stop
// strings matched on decoded bytes across token boundaries (the text never includes a stop
// string or a released part of one); MaxContext; exact prompt-lookup speculative decoding
// (Speculative: greedy output identical to plain decoding by construction, sampling by the
// rejection rule); and OnDone, which reports a StopReason.
//
// # Guarantees
//
// Logits are bit-identical across thread counts, SIMD and pure-Go kernels (-tags purego), memory
// budgets, full recompute versus incremental decoding, chunked versus one-call prefill, and
// snapshot/restore (§5.6, "E1"), because every reduction has a fixed partition and order.
// Against the oracle fixtures (§13.2) greedy and teacher-forced tokens agree exactly and
// logits within 1e-5.
//
// Bad input never panics: token ids outside the vocabulary are *TokenError, a checkpoint that
// lacks or mis-shapes tensors is refused with one *BindError listing all of them, a failure inside
// a layer is a *ForwardError (after which the session reports ErrBroken until Reset or Restore), a
// routed expert that cannot be read is a *cache.ExpertLoadError inside it, and a state file or
// snapshot that cannot be restored is a *StateError (ErrState) saying why. Model.Stats reports
// the weight traffic of the trunk store and the expert cache.
//
// # Packages
//
// The root composes config, safetensors, quant, attention, moe, trunk (the budgeted dense-weight
// store), cache (the routed-expert cache) and the internal kernels; layout is the released tensor
// table they all name tensors by, sample picks tokens from logits. None of them imports the root;
// safetensors, tokenizer and quant import nothing model-specific.
//
// Section signs (§5.6) in this and every package's documentation refer to the design document
// in the module's docs directory (docs/design.md and its chapters).
package k3
