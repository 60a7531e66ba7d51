#include "modelgen/fixture.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "base/clock.h"
#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/weight_names.h"

namespace specd {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t HashName(const std::string& s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a, then mixed
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return SplitMix64(h);
}

// Two 32-bit uniforms in [-1, 1) summed: a triangular distribution with
// standard deviation sqrt(2/3); scaled so the result has std 0.02.
float RandomValue(uint64_t key, uint64_t index) {
  uint64_t r = SplitMix64(key + index * 0xd1342543de82ef95ull);
  constexpr float kScale = 0.02f / 0.81649658f / 2147483648.f;
  float a = static_cast<float>(static_cast<int64_t>(r & 0xffffffffu) - 2147483648LL);
  float b = static_cast<float>(static_cast<int64_t>(r >> 32) - 2147483648LL);
  return (a + b) * kScale;
}

ModelConfig TinyLlama() {
  ModelConfig c;
  c.arch = "llama";
  c.n_layers = 2;
  c.hidden_dim = 64;
  c.ffn_dim = 128;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 256;
  c.max_seq_len = 2048;
  c.norm_eps = 1e-5f;
  c.rope_theta = 10000.f;
  c.tie_embeddings = false;
  c.bos_id = 1;
  c.eos_ids = {2};
  return c;
}

// DeepSeek-V3 at toy size: 3 layers (layer 0 dense, 1-2 MoE), MLA with a q
// LoRA, 8 routed experts in 2 groups (top 3 from the best group), 1 shared
// expert, sigmoid scores with the noaux_tc correction bias, YaRN x4.
ModelConfig TinyDeepseekV3() {
  ModelConfig c;
  c.arch = "deepseek_v3";
  c.n_layers = 3;
  c.hidden_dim = 64;
  c.ffn_dim = 128;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.vocab_size = 256;
  c.max_seq_len = 256;
  c.norm_eps = 1e-6f;
  c.rope_theta = 10000.f;
  c.rope_style = RopeStyle::kInterleaved;
  RopeScaling& y = c.rope_scaling;
  y.type = "yarn";
  y.factor = 4.f;
  y.original_max_position = 64;  // max_seq_len / factor
  y.beta_fast = 32.f;
  y.beta_slow = 1.f;
  y.mscale = 1.f;
  y.mscale_all_dim = 1.f;
  c.bos_id = 0;
  c.eos_ids = {1};
  MlaConfig& m = c.mla;
  m.q_lora_rank = 32;
  m.kv_lora_rank = 32;
  m.qk_nope_head_dim = 16;
  m.qk_rope_head_dim = 8;
  m.v_head_dim = 16;
  c.head_dim = m.qk_rope_head_dim;
  MoeConfig& e = c.moe;
  e.n_routed_experts = 8;
  e.n_shared_experts = 1;
  e.top_k = 3;
  e.expert_ffn_dim = 32;
  e.first_k_dense = 1;
  e.layer_freq = 1;
  e.scoring = "sigmoid";
  e.topk_method = "noaux_tc";
  e.n_group = 2;
  e.topk_group = 1;
  e.norm_topk_prob = true;
  e.routed_scaling_factor = 2.5f;
  return c;
}

// Kimi-K2's routing and RoPE on the toy shapes: one expert group,
// routed_scaling_factor 2.827, rope_theta 50000, YaRN x32 with
// beta_fast = beta_slow = 1 (a zero-width ramp) and mscale = mscale_all_dim = 1.
ModelConfig TinyKimiK2() {
  ModelConfig c = TinyDeepseekV3();
  c.rope_theta = 50000.f;
  c.rope_scaling.factor = 32.f;
  c.rope_scaling.original_max_position = 64;
  c.max_seq_len = 2048;  // factor * original_max_position, as Kimi-K2's 32 * 4096
  c.rope_scaling.beta_fast = 1.f;
  c.rope_scaling.beta_slow = 1.f;
  c.moe.n_group = 1;
  c.moe.topk_group = 1;
  c.moe.routed_scaling_factor = 2.827f;
  return c;
}

// Moonlight-16B-A3B: DeepSeek-V3 architecture with a plain q_proj (no q
// LoRA), 2 shared experts, one expert group, routed_scaling_factor 2.446,
// rope_theta 50000 and no RoPE scaling, on the toy shapes (the caller sets
// the real ones for moonlight-bench).
ModelConfig MoonlightBase() {
  ModelConfig c = TinyDeepseekV3();
  c.rope_scaling = RopeScaling{};
  c.rope_theta = 50000.f;
  c.norm_eps = 1e-5f;
  c.max_seq_len = 8192;
  c.mla.q_lora_rank = 0;
  c.moe.n_shared_experts = 2;
  c.moe.n_group = 1;
  c.moe.topk_group = 1;
  c.moe.routed_scaling_factor = 2.446f;
  return c;
}

// DeepSeek-V2-Lite at toy size: DeepseekV2 (softmax scores, greedy top-k,
// weights not renormalised, no correction bias), plain q_proj, 2 shared
// experts, YaRN x40 with mscale = mscale_all_dim = 0.707 as V2-Lite has.
ModelConfig TinyDeepseekV2Lite() {
  ModelConfig c = TinyDeepseekV3();
  c.arch = "deepseek_v2";
  c.mla.q_lora_rank = 0;
  c.rope_scaling.factor = 40.f;
  c.rope_scaling.original_max_position = 32;
  c.max_seq_len = 1280;  // factor * original_max_position
  c.rope_scaling.mscale = 0.707f;
  c.rope_scaling.mscale_all_dim = 0.707f;
  c.moe.n_shared_experts = 2;
  c.moe.scoring = "softmax";
  c.moe.topk_method = "greedy";
  c.moe.n_group = 1;
  c.moe.topk_group = 1;
  c.moe.norm_topk_prob = false;
  c.moe.routed_scaling_factor = 1.f;
  return c;
}

// Standard deviation of a tensor's random values (RandomWeights).
float WeightStd(const std::string& name, const ModelConfig& c) {
  auto ends_with = [&](const char* s) {
    const size_t n = std::char_traits<char>::length(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  // Router logits with std ~4 at any width (0.5 at hidden 64), so that a
  // token's experts are clearly chosen rather than near-ties.
  if (c.IsMla() && ends_with(".mlp.gate.weight")) return 4.f / std::sqrt(float(c.hidden_dim));
  // Large enough against sigmoid scores in (0, 1) to change the choice.
  if (ends_with(".e_score_correction_bias")) return 0.05f;
  return 0.02f;
}

}  // namespace

WeightSource RandomWeight(const ModelConfig& c, const TensorSpec& spec, uint64_t seed) {
  const int64_t cols = spec.shape.back();
  const bool is_norm = spec.name.size() > 7 &&
                       spec.name.compare(spec.name.size() - 7, 7, ".weight") == 0 &&
                       spec.shape.size() == 1;
  RowFn fn;
  if (is_norm) {
    fn = [cols](int64_t, float* dst) { std::fill(dst, dst + cols, 1.f); };
  } else {
    // Keyed by the name without tensor_prefix: a wrapped checkpoint (Kimi-K2.5)
    // holds the same values as the plain one.
    std::string key_name = spec.name;
    const std::string& prefix = c.tensor_prefix;
    if (!prefix.empty() && key_name.compare(0, prefix.size(), prefix) == 0) {
      key_name.erase(0, prefix.size());
    }
    const uint64_t key = HashName(key_name, seed);
    const float scale = WeightStd(key_name, c) / 0.02f;
    fn = [key, cols, scale](int64_t r, float* dst) {
      for (int64_t i = 0; i < cols; ++i) {
        dst[i] = RandomValue(key, static_cast<uint64_t>(r * cols + i)) * scale;
      }
    };
  }
  return {spec.name, spec.shape, std::move(fn)};
}

std::vector<std::string> FixturePresetNames() {
  return {
      "tiny",
      "qwen2-tiny",
      "qwen3-tiny",
      "small-170m",
      "llama-3.2-1b",
      "deepseek-v3-tiny",
      "kimi-k2-tiny",
      "kimi-k25-tiny",
      "moonlight-tiny",
      "deepseek-v2-lite-tiny",
      "moonlight-bench",
  };
}

StatusOr<ModelConfig> FixturePreset(const std::string& name) {
  ModelConfig c = TinyLlama();
  if (name == "tiny") {
    // as above
  } else if (name == "qwen2-tiny") {
    c.arch = "qwen2";
    c.qkv_bias = true;
    c.norm_eps = 1e-6f;
    c.rope_theta = 1000000.f;
    c.max_seq_len = 4096;
    c.tie_embeddings = true;
    c.bos_id = -1;
    c.eos_ids = {2, 3};
  } else if (name == "qwen3-tiny") {
    c.arch = "qwen3";
    c.qk_norm = true;
    c.head_dim = 32;  // n_heads * head_dim = 128 != hidden 64, as in real Qwen3
    c.norm_eps = 1e-6f;
    c.rope_theta = 1000000.f;
    c.max_seq_len = 4096;
    c.tie_embeddings = true;
    c.bos_id = -1;
    c.eos_ids = {2, 3};
  } else if (name == "small-170m") {
    c.n_layers = 12;
    c.hidden_dim = 768;
    c.ffn_dim = 2048;
    c.n_heads = 12;
    c.n_kv_heads = 4;
    c.head_dim = 64;
    c.vocab_size = 128256;
    c.max_seq_len = 8192;
    c.rope_theta = 500000.f;
    c.tie_embeddings = true;
    c.bos_id = 128000;
    c.eos_ids = {128001, 128009};
  } else if (name == "llama-3.2-1b") {
    c.n_layers = 16;
    c.hidden_dim = 2048;
    c.ffn_dim = 8192;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 64;
    c.vocab_size = 128256;
    c.max_seq_len = 131072;
    c.rope_theta = 500000.f;
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 32.f;
    c.rope_scaling.low_freq_factor = 1.f;
    c.rope_scaling.high_freq_factor = 4.f;
    c.rope_scaling.original_max_position = 8192;
    c.tie_embeddings = true;
    c.bos_id = 128000;
    c.eos_ids = {128001, 128008, 128009};
  } else if (name == "deepseek-v3-tiny") {
    c = TinyDeepseekV3();
  } else if (name == "kimi-k2-tiny") {
    c = TinyKimiK2();
  } else if (name == "kimi-k25-tiny") {
    c = TinyKimiK2();
    c.tensor_prefix = "language_model.";
  } else if (name == "moonlight-tiny") {
    c = MoonlightBase();
    c.max_seq_len = 512;
  } else if (name == "deepseek-v2-lite-tiny") {
    c = TinyDeepseekV2Lite();
  } else if (name == "moonlight-bench") {
    // Moonlight-16B-A3B's layer shapes, but 3 of its 27 layers (layer 0
    // dense, 1-2 MoE): ~1.95 B parameters, ~3.9 GB in bf16, so make-model
    // stays under a minute while a decode step still reads a dense layer,
    // MoE layers with 64 experts and the 163840-token head.
    c = MoonlightBase();
    c.n_layers = 3;
    c.hidden_dim = 2048;
    c.ffn_dim = 11264;
    c.n_heads = 16;
    c.n_kv_heads = 16;
    c.vocab_size = 163840;
    c.bos_id = 163584;
    c.eos_ids = {163585};
    c.mla.kv_lora_rank = 512;
    c.mla.qk_nope_head_dim = 128;
    c.mla.qk_rope_head_dim = 64;
    c.mla.v_head_dim = 128;
    c.head_dim = 64;
    c.moe.n_routed_experts = 64;
    c.moe.top_k = 6;
    c.moe.expert_ffn_dim = 1408;
  } else {
    return NotFoundError(fmt::format("unknown fixture preset '{}' (available: {})", name,
                                     fmt::join(FixturePresetNames(), ", ")));
  }
  RETURN_IF_ERROR(c.Validate("preset " + name));
  return c;
}

std::vector<WeightSource> RandomWeights(const ModelConfig& c, uint64_t seed) {
  std::vector<WeightSource> out;
  for (const TensorSpec& spec : ExpectedTensors(c)) out.push_back(RandomWeight(c, spec, seed));
  return out;
}

std::vector<WeightSource> ExtraFixtureWeights(const ModelConfig& c, uint64_t seed) {
  std::vector<WeightSource> out;
  if (c.tensor_prefix == "language_model.") {
    for (const TensorSpec& spec : KimiK25VisionTensors())
      out.push_back(RandomWeight(c, spec, seed));
  }
  return out;
}

std::vector<TensorSpec> KimiK25VisionTensors() {
  return {{"vision_tower.patch_embed.proj.weight", {16, 12}, false},
          {"mm_projector.proj.weight", {64, 16}, false}};
}

GgufVocab SyntheticVocab(const ModelConfig& c) {
  GgufVocab v;
  v.model = "llama";
  v.pre = "default";
  const int n = static_cast<int>(c.vocab_size);
  v.tokens.resize(n);
  v.scores.assign(n, 0.0f);
  v.token_types.assign(n, 1);
  std::vector<bool> taken(n, false);
  auto place = [&](int id, std::string text, int type) {
    v.tokens[id] = std::move(text);
    v.token_types[id] = type;
    taken[id] = true;
  };
  v.bos_id = c.bos_id >= 0 && c.bos_id < n ? c.bos_id : -1;
  v.eos_id = !c.eos_ids.empty() && c.eos_ids[0] >= 0 && c.eos_ids[0] < n ? c.eos_ids[0] : -1;
  if (v.bos_id >= 0) place(v.bos_id, "<s>", 3);
  if (v.eos_id >= 0 && v.eos_id != v.bos_id) place(v.eos_id, "</s>", 3);
  int next = 0;
  auto free_id = [&]() {
    while (next < n && taken[next]) ++next;
    return next < n ? next : -1;
  };
  if (int id = free_id(); id >= 0) {
    place(id, "<unk>", 2);
    v.unk_id = id;
  }
  for (int b = 0; b < 256; ++b) {
    int id = free_id();
    if (id < 0) break;
    place(id, fmt::format("<0x{:02X}>", b), 6);
  }
  for (int id = 0; id < n; ++id) {
    if (taken[id]) continue;
    v.tokens[id] = fmt::format("\u2581t{}", id);
    v.scores[id] = -static_cast<float>(id);
  }
  v.add_bos = v.bos_id >= 0;
  return v;
}

Status MakeFixture(const FixtureOptions& o) {
  if (o.out.empty()) return InvalidArgumentError("make-model: --out is required");
  ASSIGN_OR_RETURN(ModelConfig c, FixturePreset(o.preset));
  Stopwatch sw;
  std::vector<WeightSource> weights = RandomWeights(c, o.seed);
  for (WeightSource& w : ExtraFixtureWeights(c, o.seed)) weights.push_back(std::move(w));
  if (o.format == "safetensors") {
    if (o.vocab != "none") {
      return InvalidArgumentError(
          "make-model: --vocab is only supported with --format gguf "
          "(give a safetensors model a --tokenizer tokenizer.json)");
    }
    if (IsQuantized(o.dtype)) {
      return InvalidArgumentError(
          fmt::format("make-model: dtype {} needs --format gguf "
                      "(safetensors holds f32, f16 or bf16)",
                      DTypeName(o.dtype)));
    }
    RETURN_IF_ERROR(WriteSafetensorsModel(c, weights, o.dtype, o.out));
    if (!o.tokenizer_json.empty()) {
      ASSIGN_OR_RETURN(std::string tok, ReadFileToString(o.tokenizer_json));
      RETURN_IF_ERROR(WriteStringToFile(o.out + "/tokenizer.json", tok));
    }
  } else if (o.format == "gguf") {
    if (!o.tokenizer_json.empty()) {
      return InvalidArgumentError(
          "make-model: --tokenizer is only supported with --format "
          "safetensors (GGUF vocabularies are not converted)");
    }
    GgufModelOptions go;
    go.dtype = o.dtype;
    go.name = "specd fixture " + o.preset;
    GgufVocab vocab;
    if (o.vocab == "synthetic") {
      vocab = SyntheticVocab(c);
      go.vocab = &vocab;
    } else if (o.vocab != "none") {
      return InvalidArgumentError(
          fmt::format("make-model: --vocab '{}': expected none or "
                      "synthetic",
                      o.vocab));
    }
    RETURN_IF_ERROR(WriteGgufModel(c, weights, go, o.out));
  } else {
    return InvalidArgumentError(
        fmt::format("make-model: unknown format '{}' (expected "
                    "safetensors or gguf)",
                    o.format));
  }
  LOG_INFO("make-model", "wrote {} ({} {}, seed {}) to {} in {:.1f} s", o.preset, o.format,
           DTypeName(o.dtype), o.seed, o.out, sw.Seconds());
  return Status::Ok();
}

}  // namespace specd
