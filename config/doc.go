// Package config reads, validates and writes the Kimi K3 model configuration
// (config.json, §2) and derives the layer map from it.
//
// Two shapes are accepted: the released nested shape, where the language
// model's fields live in text_config and the KDA fields and layer map in
// text_config.linear_attn_config, and the flat fixture shape with everything
// at the root. The lookup order is fixed (KDA fields: linear_attn_config, then
// text_config, then the root; every other field: text_config, then the root)
// and the first location holding a listed name decides: a wrongly typed value
// there is an error and the search does not fall through to a later location.
//
// Nothing is defaulted except the three booleans (mla_use_output_gate,
// moe_renormalize, latent_moe_use_norm, default true). Every missing field,
// every wrongly typed field and every structural violation is collected and
// reported together in one *ConfigError, because a reader that quietly filled
// in a missing layer map would run a plausible-looking but wrong model.
//
// The file itself must be strict JSON (internal/fileio/strictjson: no duplicate
// keys, no NaN, valid UTF-8) and at most MaxFileSize (1 MiB, §2.4). num_hidden_layers and num_experts are bounded by what is
// plausible (MaxLayers, MaxExperts) and, through CheckAgainst, by the number
// of tensors the checkpoint actually holds: a binder calls it before it
// allocates anything per layer or per expert.
//
// Layer numbers: Config.FullAttn and Config.KDALayers are one-based, exactly
// as written in the file; every method taking a layer (IsMLA, IsKDA, IsDense,
// IsBoundary, MLASlot, …) takes a zero-based index.
//
// MarshalNested and WriteNested write a Config back in the released nested
// shape, deterministically, so that Parse returns an equal Config; the
// synthetic checkpoint generator uses them, and K3 returns the real model's
// values.
//
// This package imports only the standard library, internal/fileio/strictjson and
// internal/fileio/regular; it
// must never import the model packages (attention, moe, the module root) or
// safetensors, quant and tokenizer.
package config
