// Helpers of `specd bench`: configuration strings and running the specd
// binary itself as a child process.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace specd::app {

// Splits a configuration string into arguments like a POSIX shell without
// expansions: whitespace separates, '...' and "..." group, \ escapes the
// next character outside single quotes. InvalidArgument on an open quote.
StatusOr<std::vector<std::string>> SplitFlags(const std::string& s);

// Checks that `args` parse as `specd generate` flags (names, values, and
// checks such as --allreduce-algo's), without running anything. The error
// is CLI11's message ("The following argument was not expected: --foo").
Status CheckGenerateFlags(const std::vector<std::string>& args);

// Runs `/proc/self/exe <args...>`, waits, and parses the last line of its
// stdout that starts with '{' as JSON. A non-zero exit gives an error with
// the exit status and the last lines of the child's stderr.
StatusOr<nlohmann::json> RunSelfJson(const std::vector<std::string>& args);

// The 1-minute load average (/proc/loadavg), or -1.
double LoadAverage1();

// The human-readable report of a `specd bench --json` object: the main
// table, then per-op decode profiles and forward costs when present.
std::string FormatBenchReport(const nlohmann::json& report);

// Bar chart of decode tok/s (median, min-max error bars) per configuration,
// drawn by gnuplot into `path` (.svg or .png). Unavailable with a message
// when gnuplot is not installed.
Status PlotBench(const nlohmann::json& report, const std::string& path);

}  // namespace specd::app
