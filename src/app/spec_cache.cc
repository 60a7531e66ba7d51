#include "app/spec_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/logging.h"
#include "platform/cpu_features.h"
#include "runtime/acceptance_cache.h"
#include "runtime/step_costs.h"

namespace specd::app {
namespace {

namespace fs = std::filesystem;

// Name, size and modification time of `path` (a file, or every file of a
// folder): what changes when the weights or the binary change.
std::string FilesStamp(const std::string& path) {
  std::error_code ec;
  std::string out;
  auto add = [&](const fs::path& p) {
    const auto size = fs::file_size(p, ec);
    const auto mtime = fs::last_write_time(p, ec).time_since_epoch().count();
    out += fmt::format("{}:{}:{};", p.filename().string(), ec ? 0 : size, ec ? 0 : mtime);
  };
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) add(e.path());
  } else {
    add(path);
  }
  return fs::weakly_canonical(path, ec).string() + "{" + out + "}";
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line;
  return "unknown cpu";
}

std::string CacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return std::string(x) + "/specd";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return std::string(h) + "/.cache/specd";
  return (fs::temp_directory_path() / "specd-cache").string();
}

}  // namespace

Status PrepareStepCosts(Engine& engine, Eagle3Head* head, const SpecOptions& spec,
                        const RunnerOptions& runner, int tp, const std::string& draft_model,
                        int max_batch) {
  if (!spec.auto_shape || spec.algorithm == SpecAlgorithm::kNone) return Status::Ok();
  const int max_tokens = StepCostTokens(spec, max_batch);
  // The kernel paths (SPECD_KERNEL_ISA, SPECD_AMX) change the costs as much
  // as the machine does.
  const KernelPaths& paths = GetKernelPaths();
  const std::string key = fmt::format(
      "step costs v3 | model {} | quantize {} | repack {} | draft {} | binary {} | {} | "
      "kernels {}{} | threads {} | tp {} | tokens {}",
      FilesStamp(runner.model_path),
      runner.load.quantize ? static_cast<int>(*runner.load.quantize) : -1, runner.repack,
      draft_model.empty() ? "none" : FilesStamp(draft_model), FilesStamp("/proc/self/exe"),
      CpuModel(), QuantDotIsaName(paths.quant_dot),
      paths.amx_int8 && runner.amx ? "+amx" : "", runner.threads, tp, max_tokens);
  ASSIGN_OR_RETURN(StepCosts costs, CachedStepCosts(engine, head, max_tokens, key, CacheDir()));
  engine.set_step_costs(std::move(costs));
  return Status::Ok();
}

AcceptanceMemory::AcceptanceMemory(const SpecOptions& spec, const RunnerOptions& runner,
                                   const std::string& draft_model, const std::string& workload,
                                   bool enabled) {
  const bool drafts = spec.algorithm == SpecAlgorithm::kEagle3 ||
                      spec.algorithm == SpecAlgorithm::kNgram;
  if (!enabled || !spec.auto_shape || !drafts) return;
  key_ = fmt::format("acceptance v1 | model {} | quantize {} | draft {} | {}",
                     FilesStamp(runner.model_path),
                     runner.load.quantize ? static_cast<int>(*runner.load.quantize) : -1,
                     spec.algorithm == SpecAlgorithm::kNgram ? "n-gram" : FilesStamp(draft_model),
                     workload);
}

std::optional<AcceptanceModel> AcceptanceMemory::Load(int max_depth) const {
  if (key_.empty()) return std::nullopt;
  std::optional<AcceptanceModel> m = LoadAcceptance(CacheDir(), key_, max_depth);
  if (m.has_value()) {
    LOG_INFO("acceptance",
             "starting from earlier runs' acceptance (p(1) {:.2f}, p(2) {:.2f}; weighed as 8 "
             "drafts of a new sequence's own; --no-acceptance-cache starts from p = 0.5)",
             m->p(1), m->p(2));
  }
  return m;
}

void AcceptanceMemory::Save(const AcceptanceModel& pooled) const {
  if (!key_.empty()) SaveAcceptance(CacheDir(), key_, pooled);
}

}  // namespace specd::app
