// Tests only (header-only): tiny Llama-family checkpoints built in memory and
// written with a minimal safetensors writer of its own (so the tests do not
// depend on the loader's writers or fixtures), plus a naive scalar forward
// pass, in double precision, that re-derives the layer math from Hugging
// Face's modeling_llama.py / modeling_qwen2.py / modeling_qwen3.py. The model
// and spec tests compare the engine's optimized paths against it.
#pragma once

#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace specd::model_test {

// A fresh temporary folder, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd_model_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One tensor: f32 values, or int64 values when `i64` is non-empty.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};
using TensorMap = std::map<std::string, HostTensor>;

// Deterministic uniform values in [-1, 1) (splitmix64), independent of the
// standard library's distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  double Uniform() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  }

 private:
  uint64_t s_;
};

// A matrix (out, in) with entries uniform in ±sqrt(3/in) (unit-variance
// outputs for unit-variance inputs) or a vector around `center`.
inline HostTensor RandomMatrix(Rng& rng, int64_t out, int64_t in, double scale = 1.0) {
  HostTensor t{{out, in}, std::vector<float>(static_cast<size_t>(out * in)), {}};
  double a = scale * std::sqrt(3.0 / static_cast<double>(in));
  for (float& v : t.f32) v = static_cast<float>(a * rng.Uniform());
  return t;
}
inline HostTensor RandomVector(Rng& rng, int64_t n, double center, double spread) {
  HostTensor t{{n}, std::vector<float>(static_cast<size_t>(n)), {}};
  for (float& v : t.f32) v = static_cast<float>(center + spread * rng.Uniform());
  return t;
}

// Random weights of an EAGLE-3 draft head (LlamaForCausalLMEagle3 names) of
// width `hidden` for a target of the same width: fc (hidden, 3·hidden), one
// midlayer whose attention reads [embedding, hidden] (2·hidden), and an LM head
// over `draft_vocab` tokens. No d2t (identity mapping).
inline TensorMap RandomEagle3Head(uint64_t seed, int hidden, int n_heads, int n_kv_heads,
                                  int head_dim, int ffn, int draft_vocab) {
  Rng rng(seed);
  TensorMap m;
  const int qd = n_heads * head_dim, kvd = n_kv_heads * head_dim, H = hidden;
  m["fc.weight"] = RandomMatrix(rng, H, 3 * H);
  m["midlayer.self_attn.q_proj.weight"] = RandomMatrix(rng, qd, 2 * H);
  m["midlayer.self_attn.k_proj.weight"] = RandomMatrix(rng, kvd, 2 * H);
  m["midlayer.self_attn.v_proj.weight"] = RandomMatrix(rng, kvd, 2 * H);
  m["midlayer.self_attn.o_proj.weight"] = RandomMatrix(rng, H, qd);
  m["midlayer.mlp.gate_proj.weight"] = RandomMatrix(rng, ffn, H);
  m["midlayer.mlp.up_proj.weight"] = RandomMatrix(rng, ffn, H);
  m["midlayer.mlp.down_proj.weight"] = RandomMatrix(rng, H, ffn);
  m["lm_head.weight"] = RandomMatrix(rng, draft_vocab, H);
  for (const char* n : {"midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
                        "midlayer.post_attention_layernorm.weight", "norm.weight"})
    m[n] = RandomVector(rng, H, 1.0, 0.3);
  return m;
}

// Safetensors: u64 header length, JSON header (padded with spaces to a
// multiple of 8 so f32 data stays aligned), then the tensors back to back.
inline Status WriteSafetensors(const std::string& path, const TensorMap& tensors) {
  std::string header = "{";
  std::string data;
  for (const auto& [name, t] : tensors) {
    bool is_i64 = !t.i64.empty();
    size_t begin = data.size();
    if (is_i64)
      data.append(reinterpret_cast<const char*>(t.i64.data()), t.i64.size() * 8);
    else
      data.append(reinterpret_cast<const char*>(t.f32.data()), t.f32.size() * 4);
    std::string shape;
    for (int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + (is_i64 ? "I64" : "F32") + "\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::ofstream f(path, std::ios::binary);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
  f.close();
  if (!f) return IoError("cannot write " + path);
  return Status::Ok();
}

inline Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  return f ? Status::Ok() : IoError("cannot write " + path);
}

// The shape of a tiny model and the HF config.json keys that select it.
struct TinySpec {
  std::string arch = "LlamaForCausalLM";  // or Qwen2ForCausalLM (biases), Qwen3ForCausalLM (q/k norms)
  int n_layers = 2, hidden = 32, ffn = 48, n_heads = 4, n_kv_heads = 2, head_dim = 8;
  int vocab = 40, max_pos = 256;
  double theta = 10000.0, eps = 1e-5;
  bool tie = false;
  // RoPE scaling (HF rope_scaling): "" none, "linear" or "llama3".
  std::string rope_type;
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int original_max_pos = 64;

  bool qkv_bias() const { return arch == "Qwen2ForCausalLM"; }
  bool qk_norm() const { return arch == "Qwen3ForCausalLM"; }
};

inline std::string ConfigJson(const TinySpec& s) {
  std::string j = "{\"architectures\": [\"" + s.arch + "\"]";
  j += ", \"num_hidden_layers\": " + std::to_string(s.n_layers);
  j += ", \"hidden_size\": " + std::to_string(s.hidden);
  j += ", \"intermediate_size\": " + std::to_string(s.ffn);
  j += ", \"num_attention_heads\": " + std::to_string(s.n_heads);
  j += ", \"num_key_value_heads\": " + std::to_string(s.n_kv_heads);
  j += ", \"head_dim\": " + std::to_string(s.head_dim);
  j += ", \"vocab_size\": " + std::to_string(s.vocab);
  j += ", \"max_position_embeddings\": " + std::to_string(s.max_pos);
  j += ", \"rope_theta\": " + std::to_string(s.theta);
  j += ", \"rms_norm_eps\": " + std::to_string(s.eps);
  j += std::string(", \"tie_word_embeddings\": ") + (s.tie ? "true" : "false");
  if (!s.rope_type.empty()) {
    j += ", \"rope_scaling\": {\"rope_type\": \"" + s.rope_type +
         "\", \"factor\": " + std::to_string(s.factor);
    if (s.rope_type == "llama3")
      j += ", \"low_freq_factor\": " + std::to_string(s.low_freq_factor) +
           ", \"high_freq_factor\": " + std::to_string(s.high_freq_factor) +
           ", \"original_max_position_embeddings\": " + std::to_string(s.original_max_pos);
    j += "}";
  }
  return j + "}";
}

// Random weights under HF names. Norm weights are 1 ± 0.3 so that a wrong
// norm weight shows up in the logits.
inline TensorMap RandomLlama(const TinySpec& s, uint64_t seed) {
  Rng rng(seed);
  TensorMap m;
  const int64_t H = s.hidden, qd = int64_t{s.n_heads} * s.head_dim,
                kvd = int64_t{s.n_kv_heads} * s.head_dim;
  m["model.embed_tokens.weight"] = RandomMatrix(rng, s.vocab, H, std::sqrt(H / 3.0));
  if (!s.tie) m["lm_head.weight"] = RandomMatrix(rng, s.vocab, H);
  m["model.norm.weight"] = RandomVector(rng, H, 1.0, 0.3);
  for (int l = 0; l < s.n_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    m[p + "input_layernorm.weight"] = RandomVector(rng, H, 1.0, 0.3);
    m[p + "post_attention_layernorm.weight"] = RandomVector(rng, H, 1.0, 0.3);
    m[p + "self_attn.q_proj.weight"] = RandomMatrix(rng, qd, H);
    m[p + "self_attn.k_proj.weight"] = RandomMatrix(rng, kvd, H);
    m[p + "self_attn.v_proj.weight"] = RandomMatrix(rng, kvd, H);
    m[p + "self_attn.o_proj.weight"] = RandomMatrix(rng, H, qd);
    m[p + "mlp.gate_proj.weight"] = RandomMatrix(rng, s.ffn, H);
    m[p + "mlp.up_proj.weight"] = RandomMatrix(rng, s.ffn, H);
    m[p + "mlp.down_proj.weight"] = RandomMatrix(rng, H, s.ffn);
    if (s.qkv_bias()) {
      m[p + "self_attn.q_proj.bias"] = RandomVector(rng, qd, 0.0, 0.5);
      m[p + "self_attn.k_proj.bias"] = RandomVector(rng, kvd, 0.0, 0.5);
      m[p + "self_attn.v_proj.bias"] = RandomVector(rng, kvd, 0.0, 0.5);
    }
    if (s.qk_norm()) {
      m[p + "self_attn.q_norm.weight"] = RandomVector(rng, s.head_dim, 1.0, 0.3);
      m[p + "self_attn.k_norm.weight"] = RandomVector(rng, s.head_dim, 1.0, 0.3);
    }
  }
  return m;
}

// Writes `dir`/config.json and `dir`/model.safetensors.
inline Status WriteModelDir(const std::string& dir, const std::string& config_json,
                            const TensorMap& tensors) {
  std::filesystem::create_directories(dir);
  RETURN_IF_ERROR(WriteText(dir + "/config.json", config_json));
  return WriteSafetensors(dir + "/model.safetensors", tensors);
}

// ---- Naive double-precision reference ----

using Vec = std::vector<double>;

// y = W x for a row-major (out, in) f32 matrix.
inline Vec MatVec(const HostTensor& w, const Vec& x) {
  const size_t out = static_cast<size_t>(w.shape[0]), in = static_cast<size_t>(w.shape[1]);
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o)
    for (size_t i = 0; i < in; ++i) y[o] += static_cast<double>(w.f32[o * in + i]) * x[i];
  return y;
}
// RMSNorm over x[begin, begin + n) times w.
inline void RmsNormInPlace(Vec& x, size_t begin, size_t n, const HostTensor& w, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[begin + i] * x[begin + i];
  double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[begin + i] = x[begin + i] * r * w.f32[i];
}
inline Vec RmsNorm(Vec x, const HostTensor& w, double eps) {
  RmsNormInPlace(x, 0, x.size(), w, eps);
  return x;
}
inline Vec Row(const HostTensor& t, int64_t r) {
  size_t in = static_cast<size_t>(t.shape[1]);
  return Vec(t.f32.begin() + r * in, t.f32.begin() + (r + 1) * in);
}

// HF's rope_init_fn: inv_freq[i] = theta^(-2i/d); "linear" divides every
// frequency by factor; "llama3" (_compute_llama3_parameters) divides the
// low frequencies (wavelength > original/low_freq_factor) by factor, keeps
// the high ones (wavelength < original/high_freq_factor) and interpolates
// between them by smooth = (original/wavelength - low) / (high - low).
inline Vec NaiveInvFreq(int head_dim, double theta, const std::string& type, double factor,
                        double low, double high, double original) {
  const double pi = 3.14159265358979323846;
  Vec inv;
  for (int i = 0; i < head_dim; i += 2) {
    double f = std::pow(theta, -static_cast<double>(i) / head_dim);
    if (type == "linear") f /= factor;
    if (type == "llama3") {
      double wavelen = 2 * pi / f;
      if (wavelen > original / low) {
        f /= factor;
      } else if (wavelen >= original / high) {
        double smooth = (original / wavelen - low) / (high - low);
        f = (1 - smooth) * (f / factor) + smooth * f;
      }
    }
    inv.push_back(f);
  }
  return inv;
}

// rotate_half RoPE of one head (HF layout): pairs (i, i + d/2).
inline void NaiveRopeHalf(double* x, int d, int pos, const Vec& inv) {
  for (int i = 0; i < d / 2; ++i) {
    double a = pos * inv[i], c = std::cos(a), s = std::sin(a);
    double x0 = x[i], x1 = x[i + d / 2];
    x[i] = x0 * c - x1 * s;
    x[i + d / 2] = x1 * c + x0 * s;
  }
}

// softmax(q·k / sqrt(d)) · v over the given slots, for one head.
inline void NaiveAttendHead(const double* q, const std::vector<const double*>& ks,
                            const std::vector<const double*>& vs, int d, double* out) {
  Vec w(ks.size());
  double mx = -1e300;
  for (size_t j = 0; j < ks.size(); ++j) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += q[i] * ks[j][i];
    w[j] = dot / std::sqrt(static_cast<double>(d));
    mx = std::max(mx, w[j]);
  }
  double sum = 0;
  for (double& e : w) sum += (e = std::exp(e - mx));
  for (int i = 0; i < d; ++i) out[i] = 0;
  for (size_t j = 0; j < ks.size(); ++j)
    for (int i = 0; i < d; ++i) out[i] += w[j] / sum * vs[j][i];
}

inline double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// The whole-sequence causal forward pass at positions 0..n-1.
// Returns (n, vocab) logits, row by row.
inline std::vector<Vec> NaiveLlamaForward(const TinySpec& s, const TensorMap& m,
                                          const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size()), H = s.hidden, hd = s.head_dim;
  const int nh = s.n_heads, nkv = s.n_kv_heads, group = nh / nkv;
  const Vec inv = NaiveInvFreq(hd, s.theta, s.rope_type, s.factor, s.low_freq_factor,
                               s.high_freq_factor, s.original_max_pos);
  const HostTensor& embed = m.at("model.embed_tokens.weight");
  std::vector<Vec> x(n);
  for (int t = 0; t < n; ++t) x[t] = Row(embed, tokens[t]);
  for (int l = 0; l < s.n_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    auto W = [&](const char* name) -> const HostTensor& { return m.at(p + name); };
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      Vec xn = RmsNorm(x[t], W("input_layernorm.weight"), s.eps);
      q[t] = MatVec(W("self_attn.q_proj.weight"), xn);
      k[t] = MatVec(W("self_attn.k_proj.weight"), xn);
      v[t] = MatVec(W("self_attn.v_proj.weight"), xn);
      if (s.qkv_bias()) {
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += W("self_attn.q_proj.bias").f32[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += W("self_attn.k_proj.bias").f32[i];
        for (size_t i = 0; i < v[t].size(); ++i) v[t][i] += W("self_attn.v_proj.bias").f32[i];
      }
      for (int h = 0; h < nh; ++h) {
        if (s.qk_norm()) RmsNormInPlace(q[t], size_t(h) * hd, hd, W("self_attn.q_norm.weight"), s.eps);
        NaiveRopeHalf(&q[t][size_t(h) * hd], hd, t, inv);
      }
      for (int h = 0; h < nkv; ++h) {
        if (s.qk_norm()) RmsNormInPlace(k[t], size_t(h) * hd, hd, W("self_attn.k_norm.weight"), s.eps);
        NaiveRopeHalf(&k[t][size_t(h) * hd], hd, t, inv);
      }
    }
    for (int t = 0; t < n; ++t) {
      Vec att(size_t(nh) * hd);
      for (int h = 0; h < nh; ++h) {
        std::vector<const double*> ks, vs;
        for (int j = 0; j <= t; ++j) {
          ks.push_back(&k[j][size_t(h / group) * hd]);
          vs.push_back(&v[j][size_t(h / group) * hd]);
        }
        NaiveAttendHead(&q[t][size_t(h) * hd], ks, vs, hd, &att[size_t(h) * hd]);
      }
      Vec o = MatVec(W("self_attn.o_proj.weight"), att);
      for (int i = 0; i < H; ++i) x[t][i] += o[i];
      Vec xn = RmsNorm(x[t], W("post_attention_layernorm.weight"), s.eps);
      Vec g = MatVec(W("mlp.gate_proj.weight"), xn), u = MatVec(W("mlp.up_proj.weight"), xn);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Silu(g[i]) * u[i];
      Vec d = MatVec(W("mlp.down_proj.weight"), g);
      for (int i = 0; i < H; ++i) x[t][i] += d[i];
    }
  }
  const HostTensor& head = m.count("lm_head.weight") ? m.at("lm_head.weight") : embed;
  std::vector<Vec> logits(n);
  for (int t = 0; t < n; ++t) logits[t] = MatVec(head, RmsNorm(x[t], m.at("model.norm.weight"), s.eps));
  return logits;
}

// max |a - b| / (1 + |b|) over two equally long rows.
inline double MaxRelDiff(const float* a, const Vec& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / (1.0 + std::abs(b[i])));
  return worst;
}
inline double MaxRelDiff(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::abs(double{a[i]} - b[i]) / (1.0 + std::abs(double{b[i]})));
  return worst;
}

}  // namespace specd::model_test
