#include "runtime/scheduler_stop.h"

#include <algorithm>

namespace specd {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStringMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  if (stops_.empty()) return std::string(text);
  const size_t scanned = held_.size();
  held_.append(text);
  // The first stop string to be completed wins (at equal ends, the one that
  // starts first), so the result does not depend on how the text was split
  // into pieces. Only ends inside the new text can complete one.
  size_t first = std::string::npos;
  for (size_t end = scanned + 1; end <= held_.size() && first == std::string::npos; ++end) {
    for (const std::string& s : stops_) {
      if (s.size() <= end && held_.compare(end - s.size(), s.size(), s) == 0)
        first = std::min(first, end - s.size());
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest suffix that could still grow into a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t max_k = std::min(held_.size(), s.size() - 1);
    for (size_t k = max_k; k > keep; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::Flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? "" : out;
}

}  // namespace specd
