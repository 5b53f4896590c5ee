// Package sample picks tokens from logits: Argmax, the greedy pick of §4.9, and Sampler,
// which applies repetition, frequency and presence penalties, temperature, top-k, top-p and
// min-p in a fixed order and draws from a seeded xoshiro256** stream, so one seed gives one
// token sequence on every machine, thread count and build.
//
// Start with Argmax for greedy decoding, or New with Options for sampling. The package knows
// nothing of models; it imports only the module's numerics.
package sample
