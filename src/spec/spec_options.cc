#include "spec/spec_options.h"

#include <algorithm>

namespace specd {

StatusOr<SpecAlgorithm> ParseSpecAlgorithm(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), ::toupper);
  if (u == "NONE" || u.empty()) return SpecAlgorithm::kNone;
  if (u == "EAGLE3" || u == "EAGLE") return SpecAlgorithm::kEagle3;
  if (u == "NGRAM") return SpecAlgorithm::kNgram;
  return InvalidArgumentError("--speculative-algorithm: expected NONE, EAGLE3 or NGRAM, got '" +
                              s + "'");
}

}  // namespace specd
