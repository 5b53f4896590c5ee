// Command k3 runs a Kimi K3 checkpoint (or a synthetic one) on the CPU through the public API of
// github.com/k3-project/k3 only.
//
//	k3 <model_dir> (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [--tok DIR] [--gen N]
//	               [--incremental] [--threads N] [--stop-ids 4,5 | --no-stop]
//	               [--out FILE] [--dump-logits FILE] [--tf-check]
//	k3 run <model_dir> ...          same as above
//	k3 synth <geometry> <dir> [--seed N]
//	k3 demo [--gen N] [--seed N] [--keep DIR]
//	k3 info <model_dir>
//	k3 --help | --version | --list-geometries
//
// Text prompts need --tok DIR, a directory holding the Kimi tiktoken.model and
// tokenizer_config.json. The text is encoded as the reference tokenizer.encode does (special names
// become their ids, no chat template, no BOS/EOS added); a rank file other than the released one is
// reported as a warning. With a tokenizer, the JSON report's generated_text is the complete
// decoded output (invalid UTF-8 replaced as Python's errors="replace" does), the per-step table
// shows each token's text, and the default stop set is the tokenizer's [EOS] and <|end_of_msg|>
// plus the config's eos_token_id (--stop-ids replaces it, --no-stop empties it).
//
// Exit codes (SPEC §11.1): 0 success; 2 usage or validation error (including a prompt that does
// not encode to ids in [0, vocab) or an unreadable --prompt-file); 1 runtime failure (open, bind,
// forward, tokenizer load or decode); 4 a routed expert could not be loaded; 130/143 interrupted by
// SIGINT/SIGTERM after writing the report for the tokens so far.
//
// It must import only the public packages (the root k3 package and tokenizer; its tests add
// internal/fixtures), never the internal or layer packages, so that it shows what a user of the
// library can do.
package main
