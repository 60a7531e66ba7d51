// Small statistics for benchmark reports: order statistics of a sample and a
// confidence interval for a ratio measured in paired rounds.
#pragma once

#include <vector>

namespace specd {

struct Summary {
  int n = 0;
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0;  // q1/q3: 25th/75th percentiles
};
// Percentiles interpolate linearly between order statistics (numpy's default).
// An empty sample gives n = 0 and zeros.
Summary Summarize(std::vector<double> x);

// Two-sided Student-t quantile t_{1 - alpha/2, df} for alpha = 0.05 (95%).
// REQUIRES: df >= 1.
double StudentT95(int df);

// The ratio B/A of paired rounds (a[i], b[i] measured back to back, so slow
// drift of the machine cancels): the geometric mean of b[i]/a[i] and a 95%
// Student-t interval on the mean log ratio, mapped back with exp. With fewer
// than two rounds the interval is [ratio, ratio] and has_interval is false.
// REQUIRES: a.size() == b.size(), all values > 0.
struct RatioInterval {
  double ratio = 0, low = 0, high = 0;
  bool has_interval = false;
};
RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace specd
