// The supervisor: starts one process per rank, waits for each to report
// ready or to fail, and when something fails prints the root cause first.
//
// Ranks are forked (not exec'd) from the supervisor, so they inherit what the
// caller set up before Supervise (e.g. the shared-memory group). Each rank
// gets a status pipe and reports through RankReporter: "ready", or an error
// with its stage. Waiting is event-driven (poll on the pipes and a signalfd
// for SIGCHLD/SIGINT/SIGTERM): a rank's exit is noticed at once.
//
// Teardown rules: on the first failure, the supervisor waits a short grace
// period for the other ranks' own errors (usually consequences: timeouts on
// the dead rank), then SIGTERMs the rest and SIGKILLs what remains; ranks
// die with the supervisor (PR_SET_PDEATHSIG), so nothing is orphaned.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

// Handed to each rank's main function; writes one JSON line per event to the
// supervisor. Safe to call from the rank's main thread.
class RankReporter {
 public:
  RankReporter(int rank, int fd) : rank_(rank), fd_(fd) {}
  int rank() const { return rank_; }
  void Ready();
  // Reports the rank's error (its stage, code, message, hint).
  void Fail(const Status& status);

 private:
  void Send(const std::string& line);
  int rank_;
  int fd_;
};

struct SupervisorOptions {
  int world = 1;
  // Seconds to collect other ranks' errors after the first failure.
  double grace_s = 0.5;
  // Where to write the JSON failure report (empty: nowhere).
  std::string report_file;
  // Called in the supervisor once every rank is ready (e.g. to log it).
  std::function<void()> on_all_ready;
};

// One observed failure, for the root-cause report.
struct ObservedFailure {
  int rank = -1;
  std::string stage;
  std::string code;     // StatusCodeName, or "" for a process exit
  std::string message;
  std::string hint;
  double time_s = 0;    // seconds since the supervisor started
  int exit_code = -1;   // when the process exited
  int signal = 0;       // when it was killed by a signal
  bool killed_by_supervisor = false;
};

// Forks options.world ranks running rank_main(rank, reporter) → exit code,
// supervises them and returns the process exit code for the supervisor:
// 0 when every rank exits 0; otherwise non-zero after printing the report.
// REQUIRES: called before the process starts any threads (fork safety).
int Supervise(const SupervisorOptions& options,
              const std::function<int(int rank, RankReporter& reporter)>& rank_main);

// Formats failures root cause first (text for the terminal and log, JSON for
// --report-file). Exposed for tests.
std::string FormatFailureText(const std::vector<ObservedFailure>& failures);
std::string FormatFailureJson(const std::vector<ObservedFailure>& failures);

}  // namespace specd
