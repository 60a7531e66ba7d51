// One line per event on stderr, human-readable or JSON lines.
//
//   text: 2026-12-02T10:40:27.123Z INFO  rank=0 [load weights] loaded 147 tensors
//   json: {"ts":"...","level":"info","rank":0,"stage":"load weights","msg":"..."}
//
// Each line is written with a single write(2) so lines from concurrent ranks
// sharing a pipe do not interleave. Logging never throws and never fails the
// caller: if formatting fails, the raw message is written instead, so a
// logging problem cannot hide the error being reported.
// Thread-safe.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace specd {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText, kJson };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// The rank printed on every line; -1 (default) prints no rank.
void SetLogRank(int rank);
// Redirects log lines to `fd` (default 2).
void SetLogFd(int fd);
// Parses "text"/"json" and "debug"/"info"/"warn"/"error".
StatusOr<LogFormat> ParseLogFormat(std::string_view s);
StatusOr<LogLevel> ParseLogLevel(std::string_view s);

void LogMessage(LogLevel level, std::string_view stage, std::string_view msg);
// Logs a non-OK status at ERROR with its stage, rank and hint as fields.
void LogStatus(const Status& status);
// One event with an explicit rank (-1: none) and hint; in JSON format it also
// carries `field` holding `raw_json` (a complete JSON value, not checked), e.g.
// the supervisor's failure report. Text format ignores the field.
void LogRecord(LogLevel level, std::string_view stage, std::string_view msg, int rank,
               std::string_view hint, std::string_view field, std::string_view raw_json);
// Logs `msg` only the first time `key` is seen in this process (hardware
// fallbacks: "log the reason once").
void LogOnce(LogLevel level, std::string_view key, std::string_view stage, std::string_view msg);

// Escapes a string for inclusion in a JSON string literal.
std::string JsonEscape(std::string_view s);

template <typename... Args>
void Logf(LogLevel level, std::string_view stage, fmt::format_string<Args...> f, Args&&... args) {
  if (level < GetLogLevel()) return;
  std::string msg;
  try {
    msg = fmt::format(f, std::forward<Args>(args)...);
  } catch (...) {
    fmt::string_view raw = f;
    msg.assign(raw.data(), raw.size());
  }
  LogMessage(level, stage, msg);
}

}  // namespace specd

#define LOG_DEBUG(stage, ...) ::specd::Logf(::specd::LogLevel::kDebug, stage, __VA_ARGS__)
#define LOG_INFO(stage, ...) ::specd::Logf(::specd::LogLevel::kInfo, stage, __VA_ARGS__)
#define LOG_WARN(stage, ...) ::specd::Logf(::specd::LogLevel::kWarn, stage, __VA_ARGS__)
#define LOG_ERROR(stage, ...) ::specd::Logf(::specd::LogLevel::kError, stage, __VA_ARGS__)
