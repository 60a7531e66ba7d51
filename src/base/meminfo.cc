#include "base/meminfo.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/mapped_file.h"

namespace specd {

std::optional<int64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    char* end = nullptr;
    const long long kib = std::strtoll(line.c_str() + 13, &end, 10);
    if (end == line.c_str() + 13 || kib < 0) return std::nullopt;
    return static_cast<int64_t>(kib) * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> AvailableMemoryBytes() {
  auto text = ReadFileToString("/proc/meminfo");
  if (!text.ok()) return std::nullopt;
  return ParseMemAvailable(*text);
}

StatusOr<int64_t> ParseMemorySize(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return InvalidArgumentError(what + ": expected a size such as 512M, 512MiB, 2G or 2GiB (a "
                                "plain number is MiB), got '" + text + "'");
  };
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v) || v <= 0) return bad();
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale;
  if (unit.empty() || unit == "m" || unit == "mib" || unit == "mb") scale = 1 << 20;
  else if (unit == "g" || unit == "gib" || unit == "gb") scale = 1 << 30;
  else return bad();
  const double bytes = v * scale;
  if (bytes < 1 || bytes > 9.0e18) return bad();
  return static_cast<int64_t>(bytes);
}

}  // namespace specd
