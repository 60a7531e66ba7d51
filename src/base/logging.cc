#include "base/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <set>

namespace specd {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::atomic<int> g_rank{-1};
std::atomic<int> g_fd{2};

const char* LevelName(LogLevel l, bool upper) {
  switch (l) {
    case LogLevel::kDebug: return upper ? "DEBUG" : "debug";
    case LogLevel::kInfo: return upper ? "INFO " : "info";
    case LogLevel::kWarn: return upper ? "WARN " : "warn";
    case LogLevel::kError: return upper ? "ERROR" : "error";
  }
  return "?";
}

std::string Timestamp() {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  int ms = static_cast<int>(duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

void WriteAll(const std::string& line) {
  int fd = g_fd.load(std::memory_order_relaxed);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      if (fd != 2) {  // the log target failed: fall back to stderr
        fd = 2;
        continue;
      }
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Emit(LogLevel level, std::string_view stage, std::string_view msg, int rank,
          std::string_view hint, std::string_view field = {}, std::string_view raw_json = {}) {
  std::string line;
  try {
    if (static_cast<LogFormat>(g_format.load()) == LogFormat::kJson) {
      line = "{\"ts\":\"" + Timestamp() + "\",\"level\":\"" + LevelName(level, false) + "\"";
      if (rank >= 0) line += ",\"rank\":" + std::to_string(rank);
      if (!stage.empty()) line += ",\"stage\":\"" + JsonEscape(stage) + "\"";
      line += ",\"msg\":\"" + JsonEscape(msg) + "\"";
      if (!hint.empty()) line += ",\"hint\":\"" + JsonEscape(hint) + "\"";
      if (!field.empty() && !raw_json.empty()) {
        line += ",\"" + JsonEscape(field) + "\":";
        line += raw_json;
      }
      line += "}\n";
    } else {
      line = Timestamp() + " " + LevelName(level, true);
      if (rank >= 0) line += " rank=" + std::to_string(rank);
      if (!stage.empty()) line += " [" + std::string(stage) + "]";
      line += " ";
      // One event, one line: embedded newlines become " | ".
      for (char c : msg) {
        if (c == '\n') line += " | ";
        else line += c;
      }
      if (!hint.empty()) line += " (hint: " + std::string(hint) + ")";
      line += "\n";
    }
  } catch (...) {
    line.assign(msg.data(), msg.size());
    line += "\n";
  }
  WriteAll(line);
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }
LogFormat GetLogFormat() { return static_cast<LogFormat>(g_format.load()); }
void SetLogRank(int rank) { g_rank = rank; }
void SetLogFd(int fd) { g_fd = fd; }

StatusOr<LogFormat> ParseLogFormat(std::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return InvalidArgumentError("--log-format: expected 'text' or 'json', got '" + std::string(s) +
                              "'");
}

StatusOr<LogLevel> ParseLogLevel(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return InvalidArgumentError("--log-level: expected debug|info|warn|error, got '" +
                              std::string(s) + "'");
}

void LogMessage(LogLevel level, std::string_view stage, std::string_view msg) {
  if (level < GetLogLevel()) return;
  Emit(level, stage, msg, g_rank.load(), {});
}

void LogStatus(const Status& status) {
  if (status.ok()) return;
  int rank = status.rank() >= 0 ? status.rank() : g_rank.load();
  std::string msg;
  try {
    msg = std::string(StatusCodeName(status.code())) + ": " + status.message();
  } catch (...) {
  }
  Emit(LogLevel::kError, status.stage(), msg, rank, status.hint());
}

void LogRecord(LogLevel level, std::string_view stage, std::string_view msg, int rank,
               std::string_view hint, std::string_view field, std::string_view raw_json) {
  if (level < GetLogLevel()) return;
  Emit(level, stage, msg, rank, hint, field, raw_json);
}

void LogOnce(LogLevel level, std::string_view key, std::string_view stage, std::string_view msg) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (seen.count(key)) return;
    seen.emplace(key);
  }
  LogMessage(level, stage, msg);
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace specd
