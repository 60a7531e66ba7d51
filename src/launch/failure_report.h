// The supervisor's failure report: given what it observed about each rank that
// failed, say which failure is the root cause and label the rest.
//
// Rules (docs: ARCHITECTURE.md "Errors and diagnosis"):
//  - The root cause is the earliest failure (by observation time, then rank)
//    that is not a consequence. A failure is a consequence when its status code
//    is DeadlineExceeded / Unavailable / Cancelled, its message names a dead or
//    missing peer or a collective timeout, the supervisor's own teardown killed
//    it, or it ended by SIGTERM/SIGINT/SIGQUIT/SIGHUP/SIGPIPE after the root.
//  - Ranks that failed the same way as the root (same code and message up to
//    rank ids) are listed with it; the others are grouped by (code, stage,
//    message) into consequences and other failures.
//  - When the rank supplies no hint, the signature table shared with
//    `specd diagnose` (base/failure_signature.h) supplies one.
// Pure functions: no I/O, thread-safe.
#pragma once

#include <string>
#include <vector>

namespace specd::launch {

struct RankFailure {
  int rank = -1;
  std::string stage;        // "load weights", "comm init"; empty if unknown
  std::string message;      // the rank's error message; empty if it died silently
  std::string hint;         // the rank's own hint, if any
  std::string status_code;  // StatusCodeName(), e.g. "NotFound"; empty if unknown
  double time_s = 0;        // when the supervisor observed the failure
  int exit_code = 0;        // process exit status; meaningful when signal == 0
  int signal = 0;           // terminating signal, 0 if it exited
  std::vector<std::string> last_log_lines;  // oldest first
  bool torn_down = false;   // killed by the supervisor's own teardown
  bool oom_kill_seen = false;  // the cgroup's oom_kill counter rose while this rank ran
};

// Ranks sharing one failure description.
struct FailureGroup {
  std::vector<int> ranks;  // ascending
  std::string stage;
  std::string status_code;
  std::string summary;     // "DeadlineExceeded: waiting for rank 1 ..." or "killed by signal 15 (SIGTERM)"
  std::string reason;      // why it is a consequence ("peer timeout", "stopped by teardown"); empty otherwise
};

struct FailureReport {
  bool empty = true;                // no failures given
  RankFailure root;                 // valid unless empty
  std::string root_summary;
  bool root_is_consequence = false; // every failure looked like a consequence
  std::string signature;            // FailureSignature::name or empty
  std::string hint;                 // the rank's hint, else the signature's
  std::vector<int> same_ranks;      // other ranks that failed the same way as the root
  std::vector<FailureGroup> consequences;
  std::vector<FailureGroup> other_failures;  // failures unlike the root and not consequences
  std::vector<int> missing_ranks;   // ranks the messages say never arrived
};

FailureReport BuildFailureReport(std::vector<RankFailure> failures);

// The root cause first as one block, then the consequences; for the terminal and the log.
std::string FormatFailureReportText(const FailureReport& report);
// One JSON object for --report-file:
//   {"root_cause": {"rank","stage","status_code","message","summary","hint","signature",
//                   "exit_code","signal","time_s","same_ranks","last_log_lines"} | null,
//    "root_is_consequence", "consequences": [{"ranks","stage","status_code","summary","reason"}],
//    "other_failures": [...], "missing_ranks": [...]}
std::string FormatFailureReportJson(const FailureReport& report);

// "0, 2-4, 7"
std::string FormatRankList(const std::vector<int>& ranks);

}  // namespace specd::launch
