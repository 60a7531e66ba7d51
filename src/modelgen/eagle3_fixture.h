// A random-weight EAGLE-3 draft head for a given target model (`specd
// make-model --preset eagle3-head --target M`): the speculation machinery at a
// real model's shapes with a draft that is almost never accepted, for
// benchmarks that must show speculation costing nothing when it cannot pay.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "tensor/dtype.h"

namespace specd {

struct Eagle3FixtureOptions {
  std::string target;  // the target model (folder or .gguf) whose shapes the head takes
  std::string out;     // output folder: config.json + model.safetensors
  DType dtype = DType::kBF16;  // f32, f16 or bf16
  uint64_t seed = 0;
  int draft_vocab = 0;  // 0: min(target vocab, 32000), the size EAGLE-3 heads are trained with
};

// The head's config for target `t`: LlamaForCausalLMEagle3 with the target's
// hidden size, heads, head_dim, FFN width, RoPE and vocabulary, one midlayer,
// aux hidden states from layers {2, L/2, L-3} (SGLang's default for Llama
// targets, clamped into [0, L-1]), no embed_tokens (the target's is shared);
// the written d2t maps draft token i to target token i.
ModelConfig Eagle3FixtureConfig(const ModelConfig& t, int draft_vocab);

// config.json text for a head config from Eagle3FixtureConfig.
std::string Eagle3ConfigJson(const ModelConfig& head, DType dtype);

// Reads the target's config (weights are not loaded), writes the head.
// InvalidArgument naming the field for a target that is not a Llama-family
// model or a dtype safetensors cannot hold.
Status MakeEagle3Fixture(const Eagle3FixtureOptions& options);

}  // namespace specd
