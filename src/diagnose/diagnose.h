// Root-cause extraction from logs: specd's own (text or JSON lines) and other
// servers' (Python tracebacks from many ranks, interleaved, stamped, possibly
// newest-first). The entry point for `specd diagnose`.
//
//   StatusOr<Diagnosis> d = DiagnoseFiles({"server.log"});
//   std::cout << FormatDiagnosisText(*d);
//
// Inputs are streamed line by line with bounded memory: a 1 GB log needs one
// read buffer, capped lines and bounded per-process state. A log whose order
// is reversed (tracebacks printed after their frames, time going backwards) is
// read a second time back to front; when nearly every line carries its own
// stamp, in stamp order (see StampOrderer).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "diagnose/candidate.h"
#include "diagnose/line_reader.h"

namespace specd::diagnose {

struct DiagnoseOptions {
  size_t max_line_bytes = 4096;  // longer lines are cut here
  bool detect_reversed = true;
  // stdin is copied to a temporary file (up to this size) so a reversed log
  // can be read again back to front.
  uint64_t stdin_spool_limit = uint64_t{256} << 20;
};

struct Diagnosis {
  bool found = false;
  Candidate cause;                  // valid when found
  bool cause_is_consequence = false;  // only consequences were seen
  std::string signature;            // FailureSignature::name, or empty
  std::string signature_title;
  std::string hint;
  uint64_t same_way_count = 0;      // processes that failed the same way (incl. the cause's)
  std::vector<std::string> same_way_processes;  // sorted, at most kMaxListed
  std::vector<int> missing_ranks;   // ranks the logs say never arrived
  std::vector<Candidate> consequences;  // earliest first, at most kMaxListed
  uint64_t consequences_total = 0;
  std::vector<Candidate> other_failures;  // failures unlike the cause, at most kMaxListed
  uint64_t other_failures_total = 0;
  std::vector<std::string> sources;  // input names, indexed by Candidate/Evidence::source
  ReadStats stats;                   // summed over inputs (first pass)
  bool reversed = false;             // some input was read back to front
  uint64_t streams = 0;              // process streams seen
  uint64_t noise_blocks = 0;         // "--- Logging error ---" tracebacks ignored
  std::vector<std::string> notes;    // caveats about the analysis itself

  static constexpr size_t kMaxListed = 32;
};

// Reads each path ("-" is stdin; an empty list means stdin). Fails only when
// an input cannot be opened or read; a log without errors gives found=false.
StatusOr<Diagnosis> DiagnoseFiles(const std::vector<std::string>& paths,
                                  const DiagnoseOptions& options = {});

// Diagnoses an in-memory log (tests, small inputs).
Diagnosis DiagnoseText(std::string_view text, std::string name = "<input>",
                       const DiagnoseOptions& options = {});

// Human-readable report: the cause first, then evidence and consequences.
std::string FormatDiagnosisText(const Diagnosis& d);
// One JSON object:
//   {"found": bool,
//    "cause": {"type", "message", "details", "process", "rank", "stage", "file", "line",
//              "function", "code", "log_file", "log_line", "truncated", "chain"} or null,
//    "signature": name or null, "signature_title", "hint": text or null,
//    "ranks_failed_same_way", "processes_failed_same_way": [...], "missing_ranks": [...],
//    "evidence": [{"file", "line", "text"}],
//    "consequences": [{"process", "rank", "type", "summary", "signature", "file", "line"}],
//    "consequences_total", "other_failures": [same shape], "other_failures_total",
//    "input": {"files", "bytes", "lines", "binary_lines_skipped", "truncated_lines",
//              "reversed", "streams", "logging_noise_blocks"}, "notes": [...]}
// "cause.file/line/function" locate the raising code (Python frame); "evidence"
// and consequences' "file/line" locate log lines. Unknown values are null.
std::string FormatDiagnosisJson(const Diagnosis& d);

}  // namespace specd::diagnose
