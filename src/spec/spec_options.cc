#include "spec/spec_options.h"

#include <algorithm>

namespace specd {

StatusOr<SpecAlgorithm> ParseSpecAlgorithm(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), ::toupper);
  if (u == "NONE" || u.empty()) return SpecAlgorithm::kNone;
  if (u == "EAGLE3" || u == "EAGLE") return SpecAlgorithm::kEagle3;
  if (u == "NGRAM") return SpecAlgorithm::kNgram;
  if (u == "ORACLE") return SpecAlgorithm::kOracle;
  return InvalidArgumentError(
      "--speculative-algorithm: expected NONE, EAGLE3, NGRAM or ORACLE, got '" + s + "'");
}

double OracleAcceptFor(double tau, int depth) {
  auto tokens = [&](double p) {
    double e = 0, t = 1;
    for (int i = 0; i <= depth; ++i, t *= p) e += t;
    return e;
  };
  double lo = 0, hi = 1;
  for (int it = 0; it < 100; ++it) {
    const double mid = (lo + hi) / 2;
    (tokens(mid) < tau ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace specd
