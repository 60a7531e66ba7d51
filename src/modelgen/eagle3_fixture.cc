#include "modelgen/eagle3_fixture.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/model_source.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"
#include "modelgen/safetensors_writer.h"

namespace specd {

ModelConfig Eagle3FixtureConfig(const ModelConfig& t, int draft_vocab) {
  ModelConfig h = t;
  h.arch = "llama_eagle3";
  h.n_layers = 1;
  h.tie_embeddings = false;
  h.qkv_bias = false;
  h.qk_norm = false;
  h.tensor_prefix.clear();
  h.draft_vocab_size = draft_vocab > 0 ? std::min(draft_vocab, t.vocab_size)
                                       : std::min(t.vocab_size, 32000);
  h.target_hidden_size = t.hidden_dim;
  const int L = t.n_layers;
  h.eagle_aux_layer_ids.clear();
  for (int id : {2, L / 2, L - 3}) h.eagle_aux_layer_ids.push_back(std::clamp(id, 0, L - 1));
  return h;
}

std::string Eagle3ConfigJson(const ModelConfig& head, DType dtype) {
  ModelConfig as_llama = head;
  as_llama.arch = "llama";
  // HfConfigJson cannot fail for a llama config.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(*HfConfigJson(as_llama, dtype));
  j["architectures"] = {"LlamaForCausalLMEagle3"};
  j["num_hidden_layers"] = 1;
  j["tie_word_embeddings"] = false;
  j["draft_vocab_size"] = head.draft_vocab_size;
  j["target_hidden_size"] = head.target_hidden_size;
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", head.eagle_aux_layer_ids},
                       {"use_aux_hidden_state", true},
                       {"use_input_layernorm_in_first_layer", true},
                       {"use_last_layernorm", true}};
  return j.dump(2) + "\n";
}

Status MakeEagle3Fixture(const Eagle3FixtureOptions& o) {
  if (o.dtype != DType::kF32 && o.dtype != DType::kF16 && o.dtype != DType::kBF16)
    return InvalidArgumentError(fmt::format(
        "an EAGLE-3 head is written as safetensors, which cannot hold {} (use f32, f16 or bf16)",
        DTypeName(o.dtype)));
  if (o.target.empty())
    return InvalidArgumentError("--preset eagle3-head needs --target: the model the head drafts for");
  LoadOptions lo;
  lo.check_tensors = CheckTensors::kOff;
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ck, OpenCheckpoint(o.target, lo));
  const ModelConfig& t = ck->config();
  if (t.arch != "llama" && t.arch != "mistral" && t.arch != "qwen2" && t.arch != "qwen3")
    return InvalidArgumentError(fmt::format(
        "{}: architecture '{}': random EAGLE-3 heads are made for Llama-family targets "
        "(llama, mistral, qwen2, qwen3)",
        o.target, t.arch));
  const ModelConfig h = Eagle3FixtureConfig(t, o.draft_vocab);
  const int64_t H = h.hidden_dim, F = h.ffn_dim;
  const int64_t qd = int64_t{h.n_heads} * h.head_dim, kvd = int64_t{h.n_kv_heads} * h.head_dim;
  // Eagle3Head's tensors: fc reads [low, mid, high] target hidden states, the
  // midlayer's attention reads [embedding, hidden].
  const std::vector<TensorSpec> specs = {
      {"fc.weight", {H, 3 * H}},
      {"midlayer.hidden_norm.weight", {H}, true},
      {"midlayer.input_layernorm.weight", {H}, true},
      {"midlayer.self_attn.q_proj.weight", {qd, 2 * H}},
      {"midlayer.self_attn.k_proj.weight", {kvd, 2 * H}},
      {"midlayer.self_attn.v_proj.weight", {kvd, 2 * H}},
      {"midlayer.self_attn.o_proj.weight", {H, qd}},
      {"midlayer.post_attention_layernorm.weight", {H}, true},
      {"midlayer.mlp.gate_proj.weight", {F, H}},
      {"midlayer.mlp.up_proj.weight", {F, H}},
      {"midlayer.mlp.down_proj.weight", {H, F}},
      {"norm.weight", {H}, true},
      {"lm_head.weight", {h.draft_vocab_size, H}},
  };
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return IoError(fmt::format("{}: cannot create folder: {}", o.out, ec.message()));
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  for (const TensorSpec& spec : specs) {
    WeightSource ws = RandomWeight(h, spec, o.seed);
    RETURN_IF_ERROR(w.AddTensor(ws.name, o.dtype, ws.shape, ws.rows));
  }
  // d2t[i] = target id - draft id: all zero, draft token i is target token i.
  const std::vector<int64_t> d2t(h.draft_vocab_size, 0);
  RETURN_IF_ERROR(w.AddRawTensor("d2t", DType::kI64, {h.draft_vocab_size}, d2t.data(),
                                 d2t.size() * sizeof(int64_t)));
  RETURN_IF_ERROR(w.Write(o.out + "/model.safetensors"));
  RETURN_IF_ERROR(WriteStringToFile(o.out + "/config.json", Eagle3ConfigJson(h, o.dtype)));
  LOG_INFO("make-model", "wrote a random EAGLE-3 head for {} ({}, hidden {}, draft vocab {}, aux "
           "layers {}) to {}",
           o.target, t.arch, H, h.draft_vocab_size, fmt::join(h.eagle_aux_layer_ids, ","), o.out);
  return Status::Ok();
}

}  // namespace specd
