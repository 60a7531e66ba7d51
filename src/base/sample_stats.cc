#include "base/sample_stats.h"

#include <algorithm>
#include <cmath>

namespace specd {
namespace {

double Percentile(const std::vector<double>& sorted, double p) {
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

Summary Summarize(std::vector<double> x) {
  Summary s;
  if (x.empty()) return s;
  std::sort(x.begin(), x.end());
  s.n = static_cast<int>(x.size());
  s.min = x.front();
  s.max = x.back();
  s.median = Percentile(x, 0.5);
  s.q1 = Percentile(x, 0.25);
  s.q3 = Percentile(x, 0.75);
  return s;
}

double StudentT95(int df) {
  // t_{0.975, df} for df = 1..30, then the normal-approximation tail.
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 30) return kTable[std::max(df, 1) - 1];
  // Cornish-Fisher expansion of t around z = 1.95996 (error < 1e-3 for df > 30).
  const double z = 1.959964, n = df;
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n);
}

RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b) {
  RatioInterval r;
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return r;
  std::vector<double> logs(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    logs[i] = std::log(b[i] / a[i]);
    mean += logs[i];
  }
  mean /= static_cast<double>(n);
  r.ratio = r.low = r.high = std::exp(mean);
  if (n < 2) return r;
  double var = 0;
  for (double l : logs) var += (l - mean) * (l - mean);
  var /= static_cast<double>(n - 1);
  const double half = StudentT95(static_cast<int>(n - 1)) * std::sqrt(var / static_cast<double>(n));
  r.low = std::exp(mean - half);
  r.high = std::exp(mean + half);
  r.has_interval = true;
  return r;
}

}  // namespace specd
