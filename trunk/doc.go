// Package trunk holds the dense weights of a model (every per-layer tensor except routed experts,
// plus the output head and the embedding table) under a memory budget: it plans what stays resident and what streams,
// loads the resident part, streams the rest from disk through a small ring of aligned slots in
// the fixed walk order of a forward pass, packs a checkpoint's trunk into the trunk.bin +
// trunk.json layout of §8 and opens a packed trunk again (OpenPacked).
//
// The layer math never sees where its weights come from: Store.Matrix returns a quant.Matrix,
// either a view of resident memory or a matrix whose row ranges are leased from the ring while a
// kernel runs over them. Each output row is computed by the same kernel over the same bytes
// either way, so results are bit-identical at every budget.
//
// The package knows nothing of the model: callers describe tensors (name, file, offset, size,
// dtype, matrix shape, the order in which the layer math first uses them) and receive matrices.
// It reads files through package storage, imports quant and safetensors, and never the root
// package.
package trunk
