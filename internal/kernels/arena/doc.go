// Package arena provides the bump allocator behind the attention and moe
// workspaces: one buffer, sized for a whole Forward call up front, from which
// the call takes its scratch slices, so a steady decode loop allocates
// nothing.
//
// It holds no global state and imports nothing: it must never import a
// model package (attention, moe, quant, the root k3 package).
package arena
