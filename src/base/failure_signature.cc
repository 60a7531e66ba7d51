#include "base/failure_signature.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>

namespace specd {
namespace {

bool Has(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// ASCII case-insensitive search; `needle` must be lower case.
bool HasNoCase(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return true;
  if (hay.size() < needle.size()) return false;
  const char first = needle[0];
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(hay[i])) != first) continue;
    size_t j = 1;
    while (j < needle.size() &&
           std::tolower(static_cast<unsigned char>(hay[i + j])) == needle[j]) {
      ++j;
    }
    if (j == needle.size()) return true;
  }
  return false;
}

// True when any of type / message / details contains any needle.
bool TextHasAny(const FailureText& t, std::initializer_list<std::string_view> needles) {
  for (std::string_view n : needles) {
    if (Has(t.type, n) || Has(t.message, n) || Has(t.details, n)) return true;
  }
  return false;
}

bool TextHasAnyNoCase(const FailureText& t, std::initializer_list<std::string_view> needles) {
  for (std::string_view n : needles) {
    if (HasNoCase(t.type, n) || HasNoCase(t.message, n) || HasNoCase(t.details, n)) return true;
  }
  return false;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Exception type without module path: "torch.OutOfMemoryError" -> "OutOfMemoryError".
std::string_view BaseType(std::string_view type) {
  size_t dot = type.rfind('.');
  return dot == std::string_view::npos ? type : type.substr(dot + 1);
}

bool IsKeyErrorArch(const FailureText& t) {
  if (BaseType(t.type) != "KeyError") return false;
  return IsArchitectureKey(t.message, t.context);
}

// Evidence that the kernel's OOM killer ended a process: its own log line, a
// container runtime's OOMKilled, or the cgroup's oom_kill counter (the
// supervisor adds "oom_kill counter rose" when it sees one).
bool IsOomKilled(const FailureText& t) {
  return TextHasAny(t, {"Out of memory: Killed process", "oom-kill", "OOMKilled", "oom_kill",
                        "invoked oom-killer", "Memory cgroup out of memory"});
}

// A line that is just "Killed" (what a shell prints for SIGKILL), or an exit
// status that means SIGKILL. SIGKILL has many senders (the OOM killer, kill -9,
// a job scheduler, a health check): alone it is no evidence of OOM.
bool IsKilled(const FailureText& t) {
  if (Trim(t.message) == "Killed" || Trim(t.type) == "Killed") return true;
  if (TextHasAny(t, {"exit code 137", "exit status 137", "exitcode: -9", "exit code -9",
                     "returncode -9", "signal 9", "Signal 9", "SIGKILL", "Signals.SIGKILL"})) {
    return true;
  }
  // "/bin/sh: line 1: 1234 Killed   python3 serve.py"
  std::string_view m = t.message;
  size_t k = m.find(" Killed ");
  return k != std::string_view::npos && k > 0 && std::isdigit(static_cast<unsigned char>(m[k - 1]));
}

bool IsTeardown(const FailureText& t) {
  return TextHasAny(t, {"received sigquit", "Received sigquit", "closing signal", "SIGTERM",
                        "SIGQUIT", "Terminated", "shutting down", "Shutting down",
                        "KeyboardInterrupt", "killed by the supervisor", "teardown"});
}

bool IsCollectiveTimeout(const FailureText& t) {
  if (TextHasAny(t, {"Watchdog caught collective operation timeout",
                     "collective operation timeout", "failed to pass monitoredBarrier",
                     "Timed out waiting", "timed out waiting", "waiting for a peer",
                     "waiting for peer", "never arrived", "DistStoreError",
                     "Socket Timeout", "DeadlineExceeded"})) {
    return true;
  }
  return TextHasAny(t, {"ProcessGroupNCCL", "NCCL", "c10d", "torch.distributed"}) &&
         TextHasAnyNoCase(t, {"timeout", "timed out"});
}

bool IsPeerDied(const FailureText& t) {
  if (TextHasAny(t, {"BrokenPipeError", "Broken pipe", "ConnectionResetError",
                     "Connection reset by peer", "Connection closed by peer", "EngineDeadError",
                     "See root cause above", "see root cause above", "died unexpectedly",
                     "NCCL communicator was aborted", "communicator was aborted",
                     "consequence", "Consequence"})) {
    return true;
  }
  if (TextHasAnyNoCase(t, {"peer"}) && TextHasAnyNoCase(t, {"died", "dead", "exited", "closed"})) {
    return true;
  }
  return TextHasAnyNoCase(t, {"child process", "worker process", "rank "}) &&
         TextHasAnyNoCase(t, {" died", " is dead", "exited unexpectedly"});
}

const std::vector<FailureSignature>& Table() {
  static const std::vector<FailureSignature> kTable = {
      {"unsupported_gpu_arch", "unsupported GPU architecture in a tuning table",
       "a table keyed by GPU compute capability / architecture has no entry for this GPU: add "
       "an entry for it, or fall back to generic defaults instead of indexing the table",
       false},
      {"no_kernel_image", "no kernel image for this GPU",
       "the CUDA binaries were not compiled for this GPU's architecture: install a build that "
       "includes it (e.g. TORCH_CUDA_ARCH_LIST with this sm_XX) or run on a supported GPU",
       false},
      {"cuda_oom", "CUDA out of memory",
       "the GPU ran out of memory: lower --gpu-memory-utilization / max batch size / context "
       "length, use more tensor-parallel ranks, or a smaller / quantized model",
       false},
      {"address_in_use", "address already in use",
       "another process (often a stale server) holds the port: stop it or choose another port "
       "(--port, MASTER_PORT)",
       false},
      {"weights_mismatch", "missing or mismatched weights",
       "the checkpoint does not match the model config: check the model path and revision, "
       "config.json, the quantization format and the tensor-parallel split",
       false},
      {"corrupt_weights_file", "truncated or corrupt weight file",
       "the weight file is cut short or damaged (an interrupted download or copy, a full "
       "disk): compare its size and checksum with the source, then download or convert it again",
       false},
      {"teardown", "stopped during teardown",
       "this process was stopped because another one failed: look for the first failure",
       true},
      {"oom_killed", "process killed by the kernel OOM killer",
       "the kernel's OOM killer ended the process: check `dmesg` / container memory limits and "
       "reduce host memory use (fewer ranks per host, mmap weights)",
       false},
      {"killed", "process killed by SIGKILL",
       "killed by SIGKILL (the OOM killer or an operator: check dmesg); `kill -9`, a job "
       "scheduler's time or memory limit and container health checks send it too",
       false},
      {"collective_timeout", "collective / peer timeout",
       "peers timed out waiting in a collective: the rank that never arrived failed or hung "
       "first, so look at its log; the timeouts themselves are consequences",
       true},
      {"peer_died", "peer process died",
       "this process failed because a peer died: look for the peer's own failure", true},
      {"nccl_error", "NCCL error",
       "NCCL failed: rerun with NCCL_DEBUG=INFO to see the transport and the failing call; "
       "check that all ranks see the same GPUs and network interfaces",
       false},
  };
  return kTable;
}

}  // namespace

const std::vector<FailureSignature>& FailureSignatures() { return Table(); }

bool IsArchitectureKey(std::string_view key, std::string_view context) {
  key = Trim(key);
  if (key.size() >= 2 && (key.front() == '\'' || key.front() == '"') && key.back() == key.front()) {
    key = key.substr(1, key.size() - 2);
  }
  std::string lower;
  for (char c : key) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Architecture names: sm_120, sm120, sm_90a, gfx942, compute_90.
  for (std::string_view p : {"sm_", "sm", "gfx", "compute_"}) {
    std::string_view rest(lower);
    if (rest.substr(0, p.size()) != p) continue;
    rest.remove_prefix(p.size());
    if (rest.size() >= 2 && std::isdigit(static_cast<unsigned char>(rest[0]))) return true;
  }
  // '120a', '90a': digits with an arch-specific suffix letter.
  if (lower.size() >= 3 && lower.size() <= 5 && std::isalpha(static_cast<unsigned char>(lower.back())) &&
      IsDigits(std::string_view(lower).substr(0, lower.size() - 1))) {
    return true;
  }
  // Small integers ("12", "120") and capability tuples ("(12, 0)") need the
  // lookup site to show it is keyed by device capability / architecture.
  bool small_int = IsDigits(lower) && lower.size() <= 3;
  bool tuple = lower.size() >= 5 && lower.front() == '(' && lower.back() == ')' &&
               std::all_of(lower.begin() + 1, lower.end() - 1,
                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == ' '; });
  if (!small_int && !tuple) return false;
  for (std::string_view w : {"capabilit", "arch", "sm_", "_sm", "sm_version", "compute",
                             "device", "gpu", "cuda_cc", "cc_major"}) {
    if (HasNoCase(context, w)) return true;
  }
  return false;
}

const FailureSignature* MatchFailureSignature(const FailureText& t) {
  const auto& table = Table();
  auto find = [&](std::string_view name) -> const FailureSignature* {
    for (const auto& s : table) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  if (IsKeyErrorArch(t)) return find("unsupported_gpu_arch");
  if (TextHasAny(t, {"no kernel image is available for execution on the device",
                     "cudaErrorNoKernelImageForDevice"})) {
    return find("no_kernel_image");
  }
  if (TextHasAny(t, {"CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory",
                     "cudaErrorMemoryAllocation", "Cuda failure 'out of memory'"})) {
    return find("cuda_oom");
  }
  if (TextHasAny(t, {"Address already in use", "EADDRINUSE", "address already in use"})) {
    return find("address_in_use");
  }
  if (TextHasAny(t, {"Missing key(s) in state_dict", "Unexpected key(s) in state_dict",
                     "size mismatch for", "SafetensorError", "safetensors_rust",
                     "HeaderTooLarge", "MetadataIncompleteBuffer",
                     "InvalidHeaderDeserialization"}) ||
      (TextHasAny(t, {"expected shape"}) && TextHasAny(t, {"found", "got"})) ||
      (TextHasAny(t, {"tensor '", "tensor \""}) && TextHasAny(t, {"not found", "missing"}))) {
    return find("weights_mismatch");
  }
  // specd's loaders report damaged files (not shape mismatches, above) as
  // Corruption naming the file.
  if (Trim(t.type) == "Corruption" &&
      TextHasAny(t, {".safetensors", ".gguf", ".bin", ".pt", "checkpoint", "weights"})) {
    return find("corrupt_weights_file");
  }
  if (IsTeardown(t)) return find("teardown");
  if (IsOomKilled(t)) return find("oom_killed");
  if (IsKilled(t)) return find("killed");
  if (IsCollectiveTimeout(t)) return find("collective_timeout");
  if (IsPeerDied(t)) return find("peer_died");
  if (TextHasAny(t, {"NCCL error", "ncclSystemError", "ncclInternalError",
                     "ncclUnhandledCudaError", "ncclInvalidUsage", "ncclRemoteError"})) {
    return find("nccl_error");
  }
  return nullptr;
}

bool IsConsequence(const FailureText& t) {
  std::string_view type = BaseType(Trim(t.type));
  for (std::string_view c : {"DeadlineExceeded", "Unavailable", "Cancelled", "BrokenPipeError",
                             "ConnectionResetError", "CancelledError", "EngineDeadError",
                             "DistBackendError", "KeyboardInterrupt",
                             // torchrun's summary of a child that failed first
                             "ChildFailedError"}) {
    if (type == c) return true;
  }
  const FailureSignature* sig = MatchFailureSignature(t);
  return sig != nullptr && sig->consequence;
}

std::string FailureGroupKey(std::string_view type, std::string_view message) {
  std::string key(type);
  key += ": ";
  message = message.substr(0, 240);
  static constexpr std::string_view kNumberNames[] = {"rank", "Rank", "RANK", "pid", "PID",
                                                      "cuda:", "TP", "device", "GPU", "gpu"};
  for (size_t i = 0; i < message.size();) {
    char c = message[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
      // Look back over a separator (" ", "=", ": ", "_") for a name that makes it an id.
      size_t b = start;
      while (b > 0 && b + 3 > start && (message[b - 1] == ' ' || message[b - 1] == '=' ||
                                        message[b - 1] == ':' || message[b - 1] == '_')) {
        --b;
      }
      bool id = false;
      for (std::string_view n : kNumberNames) {
        for (size_t at : {b, start}) {  // "rank 3", "rank=3", "cuda:3"
          if (at >= n.size() && message.substr(at - n.size(), n.size()) == n) id = true;
        }
      }
      if (id) {
        key += '#';
      } else {
        key.append(message.substr(start, i - start));
      }
      continue;
    }
    key += c;
    ++i;
  }
  return key;
}

std::vector<int> FindMissingRanks(std::string_view text) {
  std::string lower;
  lower.reserve(text.size());
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::vector<int> out;
  // Parses "2", "2, 5", "[1, 3]", "1 and 4" starting at `pos`.
  auto parse_list = [&](size_t pos) {
    size_t i = pos;
    auto skip = [&](std::string_view chars) {
      while (i < lower.size() && chars.find(lower[i]) != std::string_view::npos) ++i;
    };
    skip(" :=[(#");
    bool any = false;
    while (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i]))) {
      int v = 0;
      while (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i])) && v < 1000000) {
        v = v * 10 + (lower[i] - '0');
        ++i;
      }
      out.push_back(v);
      any = true;
      size_t save = i;
      skip(" ,");
      if (lower.compare(i, 4, "and ") == 0) i += 4;
      skip(" ");
      if (i >= lower.size() || !std::isdigit(static_cast<unsigned char>(lower[i]))) {
        i = save;
        break;
      }
    }
    return any;
  };
  auto after_all = [&](std::string_view key, auto&& fn) {
    for (size_t p = lower.find(key); p != std::string::npos; p = lower.find(key, p + 1)) fn(p);
  };
  after_all("missing rank", [&](size_t p) {
    size_t i = p + 12;
    if (i < lower.size() && lower[i] == 's') ++i;
    parse_list(i);
  });
  for (std::string_view k : {"waiting for rank", "waiting for peer rank", "waiting for peer"}) {
    after_all(k, [&](size_t p) {
      size_t i = p + k.size();
      if (i < lower.size() && lower[i] == 's') ++i;
      parse_list(i);
    });
  }
  // "rank 3 never arrived", "ranks 1, 2 did not arrive", "Rank 1 failed to pass monitoredBarrier"
  for (std::string_view k : {"never arrived", "did not arrive", "failed to pass monitoredbarrier",
                             "never joined", "did not join", "not arrived"}) {
    after_all(k, [&](size_t p) {
      size_t lo = p > 48 ? p - 48 : 0;
      size_t r = lower.rfind("rank", p);
      if (r == std::string::npos || r < lo) return;
      size_t i = r + 4;
      if (i < lower.size() && lower[i] == 's') ++i;
      if (i < lower.size() && lower[i] == '(') ++i;  // "rank(s)"
      if (i < lower.size() && lower[i] == 's') ++i;
      if (i < lower.size() && lower[i] == ')') ++i;
      parse_list(i);
    });
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace specd
