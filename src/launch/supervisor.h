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
// the dead rank), then stops the rest: SIGTERM, and SIGKILL 0.5 s later for
// what remains. Ranks die with the supervisor (PR_SET_PDEATHSIG), so nothing
// is orphaned. The report (root cause first) comes from launch/failure_report.h.
//
// SIGINT / SIGTERM to the supervisor stop every rank the same way. With
// rank0_stop_s > 0 (a server: rank 0 shuts down gracefully and then tells
// the other ranks to leave) the stop goes to rank 0 alone first, and the
// others are signalled only once rank 0 has exited or rank0_stop_s passed.
// Ranks other than 0 ignore SIGINT, so a terminal's Ctrl-C (sent to the
// whole process group) reaches only the supervisor and rank 0.
//
// Restarts (max_restarts > 0): when a group that had become ready fails, the
// report is printed as above, the restart is logged with its cause, and once
// every rank of the old group has exited a fresh group is forked (after
// before_restart, e.g. a new shared-memory group). A group that fails before
// it is ready (bad flags, a broken model) is not restarted; neither is one
// stopped by SIGINT/SIGTERM. After max_restarts restarts the next failure
// ends supervision as without restarts.
//
// A caller that serves clients through the ranks (the serve proxy) gets the
// group's events through on_rank_serving / on_group_failed / on_stopping and
// runs its own events while the supervisor waits (`poll`), all on the
// supervisor's one thread.
#pragma once

#include <poll.h>

#include <functional>
#include <string>

#include "base/status.h"

namespace specd {

// Handed to each rank's main function; writes one JSON line per event to the
// supervisor. Safe to call from the rank's main thread.
class RankReporter {
 public:
  RankReporter(int rank, int fd) : rank_(rank), fd_(fd) {}
  int rank() const { return rank_; }
  void Ready();
  // Reports that the rank serves clients at `address` (rank 0: its HTTP port).
  void Serving(const std::string& address);
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
  // > 0: stop rank 0 first and give it this many seconds to exit (see above).
  double rank0_stop_s = 0;
  // Fresh rank groups started after failures (see above).
  int max_restarts = 0;
  // Runs before a replacement group is forked; an error ends supervision
  // (exit 1, the failure report already printed).
  std::function<Status()> before_restart;
  // Runs in each forked rank before rank_main.
  std::function<void()> in_child;
  // Waits like poll(2) (only POLLIN is asked for); empty: poll(2).
  std::function<int(pollfd* fds, size_t n, int timeout_ms)> poll;
  // A rank of the current group called RankReporter::Serving(address).
  std::function<void(int rank, const std::string& address)> on_rank_serving;
  // The current group's first failure, as soon as it is seen. `cause`: the
  // root cause so far ("rank 1 died: killed by signal 9 (SIGKILL); hint: ...");
  // `restarting`: a fresh group will follow.
  std::function<void(const std::string& cause, bool restarting)> on_group_failed;
  // SIGINT/SIGTERM arrived: the ranks are being stopped.
  std::function<void()> on_stopping;
};

// Forks options.world ranks running rank_main(rank, reporter) → exit code,
// supervises them and returns the process exit code for the supervisor:
// 0 when every rank exits 0 (also after SIGINT/SIGTERM, when the ranks shut
// down cleanly); 128 + the signal number after SIGINT/SIGTERM when a rank had
// to be stopped; otherwise 1 after printing the failure report.
// REQUIRES: called before the process starts any threads (fork safety).
int Supervise(const SupervisorOptions& options,
              const std::function<int(int rank, RankReporter& reporter)>& rank_main);

}  // namespace specd
