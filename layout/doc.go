// Package layout is the released checkpoint's tensor table (§3.3): the name, shape, layer,
// kind and class of every tensor of the Kimi K3 text model, for a given configuration.
//
// Start with Model and Layer: Model lists the model-level tensors, Layer one decoder layer's
// trunk tensors in the order a forward pass first reads them (the order a streamed trunk walks
// them in; the root package's tests check the two agree), and Expert one routed expert's six
// MXFP4 tensors. LayerOf is the one parser of a name's layer number, Classify the one reading of
// §3.4's classification.
//
// The binder of package k3, the integrity checks, PackTrunk and synthesis of package checkpoint
// and the expert store of package cache take released names and prefixes from here, and layer
// and expert numbers from LayerOf and ParseExpert.
//
// The package knows names and shapes only: it reads no file and imports nothing of the module
// but config.
package layout
