// Recognises the root-cause block that specd's supervisor prints when ranks
// fail (see launch/failure_report.h, FormatFailureReportText):
//
//   ==== specd: a rank failed; root cause first ====
//   root cause: rank 1 [allreduce #812] failed first
//     error:     killed by signal 9 (SIGKILL)
//     hint:      ...
//     exit:      signal 9 (SIGKILL)
//   consequences (not causes):
//     rank(s) 0 [allreduce #812]: ... (...)
//
// The block restates what the ranks logged, so its lines must not count as
// failures of their own; but it is also the only record of a rank that died
// without logging (SIGKILL, OOM killer), so its root cause is kept.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specd::diagnose {

struct SupervisorRootCause {
  int rank = -1;
  std::string stage;
  std::string error;  // "Corruption: ..." or "killed by signal 9 (SIGKILL)"
  std::string hint;
  bool root_is_consequence = false;  // "root cause unknown; first failure seen: ..."
  bool valid = false;                // a "root cause" line was seen
  uint64_t error_line = 0;           // log line of "error:" (or of "root cause")
  std::string error_text;            // that line, for evidence
};

class SupervisorBlockParser {
 public:
  // Feeds one line's content (prefixes stripped) and the raw line. Returns true when the line
  // belongs to a block (the header or a line inside it); such lines must not
  // be analysed further. When a block ends (on the first line that is not
  // part of it, or at Finish), `done()` is true until TakeRootCause().
  bool Feed(std::string_view content, std::string_view raw, uint64_t line_no);
  void Finish();
  bool done() const { return done_; }
  SupervisorRootCause TakeRootCause();

 private:
  void Close();
  bool in_block_ = false;
  bool done_ = false;
  SupervisorRootCause current_;
  SupervisorRootCause finished_;
};

}  // namespace specd::diagnose
