// Strips what log collectors put in front of a line (process labels, time
// stamps, levels) so the rest can be parsed as the process wrote it.
//
// Recognised, in any order and nesting, at the start of a line:
//   container names      "vllm-1  | "
//   worker labels        "(RayWorker pid=123) ", "(VllmWorker rank=2 pid=9) "
//   bracket labels       "[TP3] ", "[rank2]: ", "[Rank 2] ", "[default3]:", "[1,3]<stderr>:",
//                        "[2025-01-01 10:00:00 TP3] " (SGLang), "[2025-01-01 10:00:00,123] "
//   ISO time stamps      "2026-12-02T10:40:27.123Z ", "2026-12-02 10:40:27,123 ",
//                        "2026-12-02 10:40:27.123 UTC  " (console exports),
//                        CRI "...Z stderr F ", then an optional level word
//   level-first stamps   "ERROR 12-02 10:40:27 [file.py:123] " (vLLM), glog "E1202 10:40:27.1 12 f.cc:3] "
//   console severities   "ERROR 2025-04-07T19:13:52.541Z ", "DEFAULT 2025-04-07T19:13:52.541Z "
//   syslog               "Dec  2 10:40:27 host prog[123]: "
//   specd text lines     "<ISO> ERROR rank=1 [load weights] ..." (rank and stage are kept)
//   CSV exports          "2026-12-02 10:40:27.101,message" or "...,\"quoted \"\"message\"\"\""
// Exactly one separator space is removed after a prefix, so the indentation of
// traceback lines ("  File ...") survives.
#pragma once

#include <string>
#include <string_view>

namespace specd::diagnose {

enum class Level { kNone = 0, kDebug, kInfo, kWarn, kError, kCritical };

struct LinePrefix {
  // The line without prefixes: a view into the parsed line, or into
  // csv_field for a quoted CSV field.
  std::string_view content;
  std::string csv_field;  // a quoted CSV message, unquoted
  // Process labels joined with '/', e.g. "vllm-1/TP3"; empty when none.
  std::string label;
  // Rank from a label ("TP3", "rank=2", "[1,3]"), else -1.
  int rank = -1;
  // Seconds from the outermost stamp, on a year-2000 calendar: the year is
  // dropped because many formats (vLLM, glog, syslog) have none, and stamps of
  // all formats in one log must compare. A collector's stamp (CRI, console
  // export, CSV) wins over the process's own, which may be naive local time
  // while the collector's carries its zone. Valid when has_ts.
  double ts = 0;
  bool has_ts = false;
  Level level = Level::kNone;
  // specd text lines: "[stage]" after the level; empty otherwise.
  std::string_view stage;
  // True for specd's own text format: ISO stamp ending in 'Z', then a specd level word.
  bool specd = false;
};

// Parses `line` into `out` (which is reset first; its label's capacity is reused).
void ParseLinePrefix(std::string_view line, LinePrefix* out);

// Seconds (year dropped, see LinePrefix::ts) for an ISO date-time at the start of `s`
// ("2026-12-02T10:40:27.123Z", "2026-12-02 10:40:27,123"); returns the number
// of bytes consumed, 0 when `s` does not start with one.
size_t ParseIsoTimestamp(std::string_view s, double* seconds);

}  // namespace specd::diagnose
