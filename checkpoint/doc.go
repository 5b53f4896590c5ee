// Package checkpoint holds the tooling around a Kimi K3 checkpoint
// directory that running the model does not need: integrity checks,
// manifests, trunk packing and synthetic checkpoints.
//
// Start with Check: it is what k3.Open runs before binding (tensor counts,
// layers beyond the configuration, colibri.fmt stamps, BF16/F16 dtypes
// whose bits contradict them and, when asked, colibri.sha256 digests) and
// returns a Report, with the model's Identity (§3.6) when asked: a content
// fingerprint, computed by Identify, that states, packed trunks and coded
// copies carry so a same-geometry sibling is refused. BuildManifest, WriteManifest, ReadManifest and
// VerifyManifest check a download once, completely, against a
// sha256sum-format list. PackTrunk copies the dense per-layer weights into
// trunk.bin and trunk.json for k3.WithPackedTrunk; MeasureLossless12 tells
// what the lossless12 format (§6.11) would save on that trunk, tensor by
// tensor. Synthesize writes a
// random checkpoint of one of the Geometries with a tokenizer sized to its
// vocabulary, for tests, benchmarks and demos.
//
// The package reads checkpoints through safetensors and never imports the
// root package k3, which imports it.
package checkpoint
