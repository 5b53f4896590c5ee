// Command k3 runs a Kimi K3 checkpoint (or a synthetic one) on the CPU through the public API of
// github.com/k3-project/k3 only.
//
//	k3 <model_dir> --ids 1,2,3 [--gen N] [--incremental] [--threads N] [--stop-ids 4,5 | --no-stop]
//	               [--out FILE] [--dump-logits FILE] [--tf-check]
//	k3 run <model_dir> ...          same as above
//	k3 synth <geometry> <dir> [--seed N]
//	k3 demo [--gen N] [--seed N] [--keep DIR]
//	k3 info <model_dir>
//	k3 --help | --version | --list-geometries
//
// Exit codes (SPEC §11.1): 0 success; 2 usage or validation error; 1 runtime failure (open, bind,
// forward); 4 a routed expert could not be loaded; 130/143 interrupted by SIGINT/SIGTERM after writing the report for the tokens so far.
//
// It must import only the root k3 package (its tests add internal/fixtures), never the internal
// or layer packages, so that it shows what a user of the library can do.
package main
