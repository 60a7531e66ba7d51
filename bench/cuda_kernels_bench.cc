// Decode-kernel bandwidth on the GPU: each kernel's bytes read per call over
// its time, against the device's theoretical DRAM bandwidth (the roofline of
// a memory-bound decode step).
//
//   cuda_kernels_bench [--json PATH] [--quick]
//
// Timing: the host clock around `iters` back-to-back launches on the default
// stream and one Synchronize(), after warm-up launches, so launch overhead
// is amortized but still counted: kernels shorter than a few microseconds
// (the 4096x4096 Q4 GEMV reads 9.4 MB, ~3 us at 3.35 TB/s) are launch-bound
// here, which is also what a decode step without CUDA graphs pays. Weights
// are bigger than L2 (50 MB on H100) for every shape but the first, so the
// numbers are DRAM bandwidth, not cache hits.
//
// Without a usable device it prints the reason, writes {"skipped": reason}
// and exits 0.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/argmax.h"
#include "cuda/device_probe.h"
#include "cuda/gemv_quant.h"
#include "cuda/kernels.h"
#include "cuda/paged_attention.h"

namespace specd::cuda {
namespace {

struct Result {
  std::string kernel;
  std::string shape;
  double bytes = 0;  // bytes one call reads and writes (weights, activations, outputs)
  int iters = 0;
  double seconds_per_call = 0;
  std::string error;  // non-empty: the kernel failed; no timing
};

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// A device buffer of `bytes` filled with `fill` (weights need no meaning to
// be timed; 0x11 makes every fp16/bf16 scale a small normal number).
std::unique_ptr<DeviceBuffer> Filled(size_t bytes, uint8_t fill, std::string* error) {
  auto buf = NewDeviceBuffer(bytes);
  if (!buf.ok()) {
    *error = buf.status().ToString();
    return nullptr;
  }
  std::vector<uint8_t> host(bytes, fill);
  Status st = (*buf)->CopyFromHost(host.data(), bytes);
  if (!st.ok()) {
    *error = st.ToString();
    return nullptr;
  }
  return std::move(buf).value();
}

// Times `launch` (which queues one call): 3 warm-up calls, then enough calls
// for ~0.2 s, at least 10.
Result Time(const std::string& kernel, const std::string& shape, double bytes,
            const std::function<Status()>& launch) {
  Result r;
  r.kernel = kernel;
  r.shape = shape;
  r.bytes = bytes;
  using Clock = std::chrono::steady_clock;
  auto run = [&](int n) -> double {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      Status st = launch();
      if (!st.ok()) {
        r.error = st.ToString();
        return -1;
      }
    }
    Status st = Synchronize();
    if (!st.ok()) {
      r.error = st.ToString();
      return -1;
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const double warm = run(3);
  if (warm < 0) return r;
  const double per_call = warm / 3;
  r.iters = static_cast<int>(std::min(2000.0, std::max(10.0, 0.2 / std::max(per_call, 1e-7))));
  const double total = run(r.iters);
  if (total < 0) return r;
  r.seconds_per_call = total / r.iters;
  return r;
}

enum class WeightFormat { kBF16, kQ8_0, kQ4_0, kQ4BF16 };

Result BenchGemv(WeightFormat f, int n_out, int n_in) {
  const char* names[] = {"gemv_bf16", "gemv_q8_0", "gemv_q4_0", "gemv_q4_bf16"};
  const double bytes_per_elem[] = {2.0, 34.0 / 32, 18.0 / 32, 18.0 / 32};
  const int fi = static_cast<int>(f);
  const size_t w_bytes = static_cast<size_t>(bytes_per_elem[fi] * double(n_out) * n_in);
  const std::string shape = std::to_string(n_out) + "x" + std::to_string(n_in);
  Result r;
  r.kernel = names[fi];
  r.shape = shape;
  auto w = Filled(w_bytes, 0x11, &r.error);
  auto x = Filled(size_t(n_in) * 4, 0, &r.error);
  auto y = Filled(size_t(n_out) * 4, 0, &r.error);
  if (!w || !x || !y) return r;
  const double bytes = double(w_bytes) + 4.0 * n_in + 4.0 * n_out;
  const float* xp = x->as<float>();
  float* yp = y->as<float>();
  return Time(names[fi], shape, bytes, [&]() -> Status {
    switch (f) {
      case WeightFormat::kBF16:
        return GemvBF16(w->as<uint16_t>(), xp, n_out, n_in, yp);
      case WeightFormat::kQ8_0:
        return GemvQ8_0(w->data(), xp, n_out, n_in, yp);
      case WeightFormat::kQ4_0:
        return GemvQ4_0(w->data(), xp, n_out, n_in, yp);
      case WeightFormat::kQ4BF16:
        return GemvQ4BF16(w->data(), xp, n_out, n_in, yp);
    }
    return Status::Ok();
  });
}

Result BenchArgmax(int n_rows, int vocab) {
  const std::string shape = std::to_string(n_rows) + "x" + std::to_string(vocab);
  Result r;
  r.kernel = "argmax";
  r.shape = shape;
  auto x = Filled(size_t(n_rows) * vocab * 4, 0x3f, &r.error);
  auto out = Filled(size_t(n_rows) * 4, 0, &r.error);
  if (!x || !out) return r;
  return Time("argmax", shape, 4.0 * n_rows * vocab,
              [&] { return ArgmaxRowsF32(x->as<float>(), n_rows, vocab, out->as<int32_t>()); });
}

// n_seqs sequences of ctx slots each, pages assigned in order.
Result BenchAttention(int n_seqs, int ctx, int n_heads, int n_kv_heads, int head_dim) {
  const int page_size = 16;
  const int pages_per_seq = (ctx + page_size - 1) / page_size;
  const int n_pages = n_seqs * pages_per_seq;
  const size_t kv_dim = size_t(n_kv_heads) * head_dim;
  const std::string shape = std::to_string(n_seqs) + " seqs x " + std::to_string(ctx) + " ctx, " +
                            std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) +
                            " heads x " + std::to_string(head_dim);
  Result r;
  r.kernel = "paged_attention";
  r.shape = shape;
  const size_t pool_bytes = size_t(n_pages) * page_size * kv_dim * 4;
  auto k = Filled(pool_bytes, 0, &r.error);
  auto v = Filled(pool_bytes, 0, &r.error);
  const size_t q_bytes = size_t(n_seqs) * n_heads * head_dim * 4;
  auto q = Filled(q_bytes, 0, &r.error);
  auto out = Filled(q_bytes, 0, &r.error);
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  std::vector<int32_t> lens(n_seqs, ctx);
  for (int i = 0; i < n_pages; ++i) table[i] = i;
  auto dtable = Filled(table.size() * 4, 0, &r.error);
  auto dlens = Filled(lens.size() * 4, 0, &r.error);
  if (!k || !v || !q || !out || !dtable || !dlens) return r;
  if (Status st = dtable->CopyFromHost(table.data(), table.size() * 4); !st.ok()) {
    r.error = st.ToString();
    return r;
  }
  if (Status st = dlens->CopyFromHost(lens.data(), lens.size() * 4); !st.ok()) {
    r.error = st.ToString();
    return r;
  }
  PagedKvF32 kv;
  kv.k = k->as<float>();
  kv.v = v->as<float>();
  kv.n_pages = n_pages;
  kv.page_size = page_size;
  // Bytes: the K and V rows once (each query head of a group re-reads its KV
  // head's rows, mostly from L2), q and out.
  const double bytes = 2.0 * n_seqs * double(ctx) * kv_dim * 4 + 2.0 * q_bytes;
  return Time("paged_attention", shape, bytes, [&] {
    return PagedDecodeAttentionF32(q->as<float>(), n_seqs, kv, dtable->as<int32_t>(), pages_per_seq,
                                   dlens->as<int32_t>(), n_heads, n_kv_heads, head_dim,
                                   out->as<float>());
  });
}

int Main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--quick]\n", argv[0]);
      return 2;
    }
  }
  FILE* json = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (!json_path.empty() && json == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 2;
  }
  const ProbeResult probe = ProbeDevices();
  std::string unusable = probe.reason;
  if (unusable.empty() && !probe.devices[0].unsupported_reason.empty()) {
    unusable = probe.devices[0].name + ": " + probe.devices[0].unsupported_reason;
  }
  if (!unusable.empty()) {
    std::printf("cuda_kernels_bench: skipped: %s\n", unusable.c_str());
    if (json != nullptr) {
      std::fprintf(json, "{\"skipped\": \"%s\"}\n", JsonEscape(unusable).c_str());
      std::fclose(json);
    }
    return 0;
  }
  const DeviceInfo& dev = probe.devices[0];
  const double peak = dev.PeakMemoryBandwidth();
  std::printf("device: %s (%s), peak DRAM bandwidth %.0f GB/s\n", dev.name.c_str(),
              dev.Arch().c_str(), peak / 1e9);

  std::vector<Result> results;
  // Llama-3-8B decode shapes: q/o projection, MLP up/gate, MLP down, LM head.
  std::vector<std::pair<int, int>> shapes = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  if (!quick) shapes.push_back({128256, 4096});
  for (WeightFormat f :
       {WeightFormat::kBF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4BF16}) {
    for (auto [n_out, n_in] : shapes) results.push_back(BenchGemv(f, n_out, n_in));
  }
  results.push_back(BenchArgmax(1, 128256));
  results.push_back(BenchArgmax(64, 128256));
  results.push_back(BenchAttention(32, 4096, 32, 8, 128));
  if (!quick) results.push_back(BenchAttention(8, 32768, 32, 8, 128));

  if (json != nullptr) {
    std::fprintf(json,
                 "{\"device\": \"%s\", \"arch\": \"%s\", \"peak_bandwidth_gbps\": %.1f,\n"
                 " \"timing\": \"host clock over back-to-back launches, one synchronize\",\n"
                 " \"results\": [",
                 JsonEscape(dev.name).c_str(), dev.Arch().c_str(), peak / 1e9);
  }
  int failures = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const char* sep = i == 0 ? "\n  " : ",\n  ";
    if (!r.error.empty()) {
      ++failures;
      std::printf("%-16s %-34s FAILED: %s\n", r.kernel.c_str(), r.shape.c_str(), r.error.c_str());
      if (json != nullptr) {
        std::fprintf(json, "%s{\"kernel\": \"%s\", \"shape\": \"%s\", \"error\": \"%s\"}", sep,
                     r.kernel.c_str(), r.shape.c_str(), JsonEscape(r.error).c_str());
      }
      continue;
    }
    const double gbps = r.bytes / r.seconds_per_call / 1e9;
    const double fraction = peak > 0 ? r.bytes / r.seconds_per_call / peak : 0.0;
    std::printf("%-16s %-34s %9.1f us %8.1f GB/s %5.1f%% of peak (%d calls)\n", r.kernel.c_str(),
                r.shape.c_str(), r.seconds_per_call * 1e6, gbps, 100 * fraction, r.iters);
    if (json != nullptr) {
      std::fprintf(json,
                   "%s{\"kernel\": \"%s\", \"shape\": \"%s\", \"bytes\": %.0f, \"iters\": %d, "
                   "\"us\": %.3f, \"gbps\": %.1f, \"fraction_of_peak\": %.4f}",
                   sep, r.kernel.c_str(), r.shape.c_str(), r.bytes, r.iters,
                   r.seconds_per_call * 1e6, gbps, fraction);
    }
  }
  if (json != nullptr) {
    std::fprintf(json, "\n]}\n");
    std::fclose(json);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace specd::cuda

int main(int argc, char** argv) { return specd::cuda::Main(argc, argv); }
