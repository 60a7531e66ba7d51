// Random-weight model fixtures at real shapes, for tests and benchmarks
// (`specd make-model`). Deterministic: the same preset, seed and dtype give
// byte-identical files.
//
// Weights: every element of a matrix or bias is a deterministic function of
// (seed, tensor name without ModelConfig::tensor_prefix, element index),
// roughly N(0, 0.02) (the sum of two uniforms), so activations stay in a sane
// range; norm weights are 1. MoE routers are wider so that routing is decided:
// mlp.gate.weight has std 4/sqrt(hidden) (router logits of std ~4; 0.5 at
// hidden 64) and mlp.gate.e_score_correction_bias std 0.05, enough to change
// which experts sigmoid scores in (0, 1) pick.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "loader/weight_names.h"
#include "modelgen/model_writer.h"

namespace specd {

// Presets: "tiny" (llama, hidden 64, 2 layers, 4 heads, 2 KV heads, FFN 128,
// vocab 256, untied), "qwen2-tiny" (tiny + q/k/v biases, tied), "qwen3-tiny"
// (q/k norms, head_dim 32 != hidden/heads), "small-170m" (hidden 768, 12
// layers, 12/4 heads, FFN 2048, vocab 128256, tied) and "llama-3.2-1b" (the
// real model's shapes and RoPE settings).
// DeepSeek-V2/V3 family (MLA + MoE), toy shapes hidden 64, 3 layers (layer 0
// dense FFN 128, then MoE: 8 routed experts of FFN 32, top 3), 4 heads,
// kv_lora 32, qk_nope 16, qk_rope 8, v 16, vocab 256:
//   "deepseek-v3-tiny"  q_lora 32, 2 expert groups (topk_group 1), 1 shared,
//                       sigmoid/noaux_tc, scaling 2.5, YaRN x4 (beta 32/1,
//                       mscale 1/1), context 256
//   "kimi-k2-tiny"      as Kimi-K2: 1 group, scaling 2.827, theta 50000,
//                       YaRN x32 (beta 1/1, mscale 1/1), context 2048
//   "kimi-k25-tiny"     kimi-k2-tiny wrapped as KimiK25ForConditionalGeneration
//                       ("language_model." prefix, text_config, two fake
//                       vision tensors); same values as kimi-k2-tiny
//   "moonlight-tiny"    as Moonlight: plain q_proj, 2 shared, 1 group,
//                       scaling 2.446, theta 50000, no RoPE scaling
//   "deepseek-v2-lite-tiny"  DeepseekV2: plain q_proj, 2 shared, softmax
//                       greedy routing, no renormalisation, YaRN x40
//                       (mscale 0.707/0.707)
//   "moonlight-bench"   Moonlight-16B-A3B's layer shapes with 3 layers
// NotFound lists the names.
StatusOr<ModelConfig> FixturePreset(const std::string& name);
std::vector<std::string> FixturePresetNames();

// Random values for one tensor of `c`: 1-D ".weight" tensors (norms) are 1,
// everything else a function of (seed, name without tensor_prefix, index),
// roughly N(0, 0.02) (routers wider, see above).
WeightSource RandomWeight(const ModelConfig& c, const TensorSpec& spec, uint64_t seed);

// Random weights for `c` in ExpectedTensors order (HF layout).
std::vector<WeightSource> RandomWeights(const ModelConfig& c, uint64_t seed);

// Random tensors a real checkpoint of `c` also holds but the text model never
// reads: Kimi-K2.5's vision tower (KimiK25VisionTensors) when tensor_prefix is
// "language_model."; else none. The loader must skip them.
std::vector<WeightSource> ExtraFixtureWeights(const ModelConfig& c, uint64_t seed);
std::vector<TensorSpec> KimiK25VisionTensors();

struct FixtureOptions {
  std::string preset = "tiny";
  std::string format = "safetensors";  // "safetensors" (out: folder) | "gguf" (out: file)
  DType dtype = DType::kF32;           // q8_0/q4_0 only with gguf
  std::string out;
  uint64_t seed = 0;
  std::string tokenizer_json;  // copied into a safetensors folder when set
  // gguf only: "none" (tokenizer.ggml.model = no_vocab) or "synthetic": an
  // SPM ("llama") vocabulary of the preset's size, so that engines which
  // insist on a tokenizer (llama.cpp) load the file for benchmarks.
  std::string vocab = "none";
};

// The "synthetic" vocabulary: <unk> at 0 (unless a special id is 0), the
// config's BOS/EOS as control tokens <s> / </s>, the 256 byte tokens
// <0x00>..<0xFF> at the first free ids, then "▁t<id>" normal tokens.
GgufVocab SyntheticVocab(const ModelConfig& c);

// Writes the fixture; InvalidArgument for impossible combinations
// (q8_0/q4_0 with safetensors, a tokenizer with gguf, unknown format).
Status MakeFixture(const FixtureOptions& options);

}  // namespace specd
