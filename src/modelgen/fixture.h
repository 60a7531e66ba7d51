// Random-weight model fixtures at real shapes, for tests and benchmarks
// (`specd make-model`). Deterministic: the same preset, seed and dtype give
// byte-identical files.
//
// Weights: every element of a matrix or bias is a deterministic function of
// (seed, tensor name, element index), roughly N(0, 0.02) (the sum of two
// uniforms), so activations stay in a sane range; norm weights are 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "modelgen/model_writer.h"

namespace specd {

// Presets: "tiny" (llama, hidden 64, 2 layers, 4 heads, 2 KV heads, FFN 128,
// vocab 256, untied), "qwen2-tiny" (tiny + q/k/v biases, tied), "qwen3-tiny"
// (q/k norms, head_dim 32 != hidden/heads), "small-170m" (hidden 768, 12
// layers, 12/4 heads, FFN 2048, vocab 128256, tied) and "llama-3.2-1b" (the
// real model's shapes and RoPE settings). NotFound lists the names.
StatusOr<ModelConfig> FixturePreset(const std::string& name);
std::vector<std::string> FixturePresetNames();

// Random weights for `c` in ExpectedTensors order (HF layout).
std::vector<WeightSource> RandomWeights(const ModelConfig& c, uint64_t seed);

struct FixtureOptions {
  std::string preset = "tiny";
  std::string format = "safetensors";  // "safetensors" (out: folder) | "gguf" (out: file)
  DType dtype = DType::kF32;           // q8_0/q4_0 only with gguf
  std::string out;
  uint64_t seed = 0;
  std::string tokenizer_json;          // copied into a safetensors folder when set
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
