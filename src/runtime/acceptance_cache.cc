#include "runtime/acceptance_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "base/logging.h"

namespace specd {
namespace {

constexpr const char* kFormat = "specd acceptance v1";

// The counts of `j[name]`, or false when it is not an array of numbers.
bool Counts(const nlohmann::json& j, const char* name, std::vector<double>* out) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_array()) return false;
  for (const auto& v : *it) {
    if (!v.is_number()) return false;
    out->push_back(v.get<double>());
  }
  return true;
}

}  // namespace

std::string AcceptanceCachePath(const std::string& cache_dir, const std::string& key) {
  return fmt::format("{}/acceptance-{:016x}.json", cache_dir, std::hash<std::string>{}(key));
}

std::optional<AcceptanceModel> LoadAcceptance(const std::string& cache_dir,
                                              const std::string& key, int max_depth) {
  const std::string path = AcceptanceCachePath(cache_dir, key);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto ignored = [&](const std::string& why) -> std::optional<AcceptanceModel> {
    LOG_WARN("acceptance", "ignoring {}: {}; starting from the prior (p = 0.5)", path, why);
    return std::nullopt;
  };
  if (j.is_discarded()) return ignored("not valid JSON (a torn or truncated write?)");
  if (!j.is_object() || j.value("format", "") != kFormat)
    return ignored(fmt::format("not a JSON object with \"format\": \"{}\"", kFormat));
  // Another key under the same hash: not ours, and not wrong.
  if (j.value("key", "") != key) return std::nullopt;
  std::vector<double> tried, accepted;
  const auto obs = j.find("observations");
  if (!Counts(j, "tried", &tried) || !Counts(j, "accepted", &accepted) || obs == j.end() ||
      !obs->is_number_integer() || obs->get<int64_t>() < 0 || obs->get<int64_t>() > INT32_MAX)
    return ignored("expected arrays \"tried\" and \"accepted\" of numbers and a count "
                   "\"observations\"");
  AcceptanceModel m(max_depth);
  if (!AcceptanceModel::FromCounts(tried, accepted, static_cast<int>(obs->get<int64_t>()),
                                   max_depth, &m))
    return ignored("counts no acceptance model has (accepted above tried, a depth tried more "
                   "often than the one above it was accepted, or a count negative or not finite)");
  return m;
}

void SaveAcceptance(const std::string& cache_dir, const std::string& key,
                    const AcceptanceModel& model) {
  if (model.observations() <= 0) return;
  const std::string path = AcceptanceCachePath(cache_dir, key);
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  std::ofstream out(tmp);
  out << nlohmann::json{{"format", kFormat},
                        {"key", key},
                        {"observations", model.observations()},
                        {"tried", model.tried()},
                        {"accepted", model.accepted()}}
             .dump();
  out.close();
  std::string why;
  if (!out) {
    why = fmt::format("writing {} failed: {}", tmp, std::strerror(errno));
  } else if (std::filesystem::rename(tmp, path, ec); ec) {
    why = fmt::format("renaming {} failed: {}", tmp, ec.message());
  }
  if (!why.empty()) {
    std::filesystem::remove(tmp, ec);
    LOG_WARN("acceptance", "could not remember the acceptance in {} ({}); the next run starts "
             "from p = 0.5", path, why);
  }
}

}  // namespace specd
