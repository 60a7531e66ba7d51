#include "launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/logging.h"
#include "launch/failure_report.h"
#include "launch/oom_kills.h"

namespace specd {
namespace {

// Status-pipe lines: "READY", "SERVING\t<address>" or "ERROR\t<stage>\t<code>\t<hint>\t<message>",
// with tabs and newlines inside fields replaced by spaces.
std::string Clean(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

std::vector<std::string> SplitTabs(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find('\t', start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

void RankReporter::Send(const std::string& line) {
  std::string l = line + "\n";
  const char* p = l.data();
  size_t left = l.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // supervisor gone: nothing else to do
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void RankReporter::Ready() { Send("READY"); }

void RankReporter::Serving(const std::string& address) { Send("SERVING\t" + Clean(address)); }

void RankReporter::Fail(const Status& s) {
  Send("ERROR\t" + Clean(s.stage()) + "\t" + StatusCodeName(s.code()) + "\t" + Clean(s.hint()) +
       "\t" + Clean(s.message()));
}

namespace {

// The root cause so far, in one line for clients (the serve proxy's error events).
std::string CauseLine(const launch::FailureReport& r) {
  std::string s = "rank " + std::to_string(r.root.rank) +
                  (r.root.signal != 0 && r.root.message.empty() ? " died: " : " failed: ");
  if (!r.root.stage.empty()) s += "[" + r.root.stage + "] ";
  s += r.root_summary;
  if (!r.hint.empty()) s += "; hint: " + r.hint;
  return s;
}

// Prints the report (root cause first) and writes --report-file.
void PrintReport(const std::vector<launch::RankFailure>& failures, const SupervisorOptions& opt) {
  launch::FailureReport report = launch::BuildFailureReport(failures);
  const std::string json = launch::FormatFailureReportJson(report);
  if (GetLogFormat() == LogFormat::kJson) {
    // One log event that carries the whole report, so JSON log pipelines see
    // the root cause first without parsing a text block.
    std::string compact = nlohmann::json::parse(json, nullptr, false).dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
    LogRecord(LogLevel::kError, report.root.stage, report.root_summary, report.root.rank,
              report.hint, "report", compact);
  } else {
    std::string text = "==== specd: a rank failed; root cause first ====\n" +
                       launch::FormatFailureReportText(report);
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  if (!opt.report_file.empty()) {
    std::ofstream f(opt.report_file);
    f << json;
    if (!f) LOG_WARN("launch", "cannot write the failure report to {}", opt.report_file);
  }
}

// Longest wait for the root cause when the first failure seen is a consequence.
constexpr double kAnnounceWaitS = 0.25;

struct GroupOutcome {
  int exit_code = 0;          // Supervise's code for this group alone
  bool failed = false;        // a rank failed (report printed)
  bool restartable = false;   // failed after ready, not interrupted, restarts left
  std::string cause;
};

// Forks one group of ranks and supervises it until every rank has exited.
GroupOutcome RunGroup(const SupervisorOptions& opt,
                      const std::function<int(int rank, RankReporter& reporter)>& rank_main,
                      int sfd, const sigset_t& old_mask, int64_t oom_kills_at_start,
                      bool restarts_left) {
  const int world = opt.world;
  struct Rank {
    pid_t pid = -1;
    int fd = -1;
    std::string buf;
    bool ready = false, exited = false, signalled = false;
    int exit_code = 0;
    int failure = -1;  // index into failures
  };
  std::vector<Rank> ranks(world);
  std::vector<launch::RankFailure> failures;
  Stopwatch clock;
  const pid_t supervisor_pid = getpid();
  GroupOutcome out;

  for (int r = 0; r < world; ++r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      LOG_ERROR("launch", "cannot create a status pipe for rank {}: {}", r, strerror(errno));
      for (int q = 0; q < r; ++q) kill(ranks[q].pid, SIGKILL);
      out.exit_code = 1;
      return out;
    }
    pid_t pid = fork();
    if (pid < 0) {
      LOG_ERROR("launch", "cannot start rank {}: fork failed: {}", r, strerror(errno));
      ::close(p[0]);
      ::close(p[1]);
      for (int q = 0; q < r; ++q) kill(ranks[q].pid, SIGKILL);
      out.exit_code = 1;
      return out;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != supervisor_pid) _exit(1);  // supervisor already gone
      // A terminal's Ctrl-C goes to the whole process group; the supervisor
      // decides how the other ranks stop (see the header).
      if (r > 0) ::signal(SIGINT, SIG_IGN);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      if (sfd >= 0) ::close(sfd);
      for (int q = 0; q < r; ++q) ::close(ranks[q].fd);
      ::close(p[0]);
      if (opt.in_child) opt.in_child();
      SetLogRank(r);
      RankReporter reporter(r, p[1]);
      int code = rank_main(r, reporter);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    ::close(p[1]);
    // drain() reads until EAGAIN: the rank keeps its end open after "READY".
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    ranks[r].pid = pid;
    ranks[r].fd = p[0];
  }

  // Stop sequence: [rank 0 alone] -> [the rest leave on their own] ->
  // SIGTERM to all -> SIGKILL to all.
  enum class Phase { kRunning, kRank0, kRest, kTerm, kKill };
  Phase phase = Phase::kRunning;
  double phase_deadline = -1;
  bool all_ready_logged = false;
  int interrupt_signal = 0;
  double first_failure_s = -1;
  bool failure_announced = false;

  auto handle_line = [&](int r, const std::string& line) {
    Rank& rk = ranks[r];
    if (line == "READY") {
      rk.ready = true;
      return;
    }
    auto f = SplitTabs(line);
    if (f.size() >= 2 && f[0] == "SERVING") {
      if (opt.on_rank_serving && first_failure_s < 0 && interrupt_signal == 0)
        opt.on_rank_serving(r, f[1]);
      return;
    }
    if (f.size() >= 5 && f[0] == "ERROR" && rk.failure < 0) {
      launch::RankFailure rf;
      rf.rank = r;
      rf.stage = f[1];
      rf.status_code = f[2];
      rf.hint = f[3];
      rf.message = f[4];
      rf.time_s = clock.Seconds();
      rf.exit_code = 1;
      rf.torn_down = rk.signalled;
      rk.failure = static_cast<int>(failures.size());
      failures.push_back(rf);
      if (first_failure_s < 0 && interrupt_signal == 0 && !rk.signalled)
        first_failure_s = rf.time_s;
    }
  };
  auto drain = [&](int r) {
    char buf[4096];
    while (true) {
      ssize_t n = ::read(ranks[r].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      ranks[r].buf.append(buf, n);
      size_t nl;
      while ((nl = ranks[r].buf.find('\n')) != std::string::npos) {
        handle_line(r, ranks[r].buf.substr(0, nl));
        ranks[r].buf.erase(0, nl + 1);
      }
    }
  };
  auto reap = [&] {
    while (true) {
      int st = 0;
      pid_t pid = waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      for (int r = 0; r < world; ++r) {
        Rank& rk = ranks[r];
        if (rk.pid != pid) continue;
        drain(r);
        rk.exited = true;
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        const int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        rk.exit_code = sig ? 128 + sig : code;
        if (code == 0) break;
        if (rk.failure >= 0) {
          failures[rk.failure].exit_code = code;
          failures[rk.failure].signal = sig;
          break;
        }
        launch::RankFailure rf;
        rf.rank = r;
        rf.exit_code = code;
        rf.signal = sig;
        rf.time_s = clock.Seconds();
        rf.torn_down = rk.signalled;
        if (sig == SIGKILL && oom_kills_at_start >= 0)
          rf.oom_kill_seen = launch::OomKillCount() > oom_kills_at_start;
        rk.failure = static_cast<int>(failures.size());
        failures.push_back(rf);
        if (first_failure_s < 0 && interrupt_signal == 0 && !rk.signalled)
          first_failure_s = rf.time_s;
        if (sig > 0 && !rk.signalled) {
          LOG_ERROR("launch", "rank {} (pid {}) was killed by signal {} ({})", r, pid, sig,
                    sigabbrev_np(sig) ? std::string("SIG") + sigabbrev_np(sig) : "?");
        }
      }
    }
  };
  auto alive = [&] {
    int n = 0;
    for (auto& r : ranks) n += !r.exited;
    return n;
  };
  auto signal_all = [&](int sig) {
    for (auto& r : ranks) {
      if (r.exited) continue;
      kill(r.pid, sig);
      r.signalled = true;
    }
  };
  auto enter_term = [&](double now) {
    signal_all(SIGTERM);
    phase = Phase::kTerm;
    phase_deadline = now + 0.5;
  };
  auto begin_stop = [&](double now) {
    if (opt.rank0_stop_s > 0 && !ranks[0].exited) {
      kill(ranks[0].pid, SIGTERM);
      ranks[0].signalled = true;
      phase = Phase::kRank0;
      phase_deadline = now + opt.rank0_stop_s;
    } else {
      enter_term(now);
    }
  };
  auto restartable = [&] { return restarts_left && all_ready_logged && interrupt_signal == 0; };

  while (alive() > 0) {
    std::vector<pollfd> pfds;
    pfds.push_back({sfd, POLLIN, 0});
    std::vector<int> who;
    for (int r = 0; r < world; ++r) {
      if (ranks[r].exited) continue;
      pfds.push_back({ranks[r].fd, POLLIN, 0});
      who.push_back(r);
    }
    double now = clock.Seconds();
    double wake = -1;
    if (phase == Phase::kRunning && first_failure_s >= 0) wake = first_failure_s + opt.grace_s;
    else if (phase != Phase::kRunning && phase != Phase::kKill) wake = phase_deadline;
    if (first_failure_s >= 0 && !failure_announced) {
      const double announce = first_failure_s + kAnnounceWaitS;
      wake = wake < 0 ? announce : std::min(wake, announce);
    }
    const int timeout_ms = wake < 0 ? -1 : std::max(0, static_cast<int>((wake - now) * 1000) + 1);
    int n = opt.poll ? opt.poll(pfds.data(), pfds.size(), timeout_ms)
                     : ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (pfds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo != SIGINT && si.ssi_signo != SIGTERM) continue;
        const char* name = si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
        now = clock.Seconds();
        if (interrupt_signal == 0) {
          interrupt_signal = static_cast<int>(si.ssi_signo);
          if (opt.on_stopping) opt.on_stopping();
        }
        if (phase == Phase::kRunning) {
          LOG_INFO("launch", "received {}: stopping {} ranks", name, alive());
          begin_stop(now);
        } else if (phase == Phase::kRank0 || phase == Phase::kRest) {
          LOG_INFO("launch", "received {} again: stopping every rank now", name);
          enter_term(now);
        }
      }
    }
    for (size_t i = 1; i < pfds.size(); ++i)
      if (pfds[i].revents & (POLLIN | POLLHUP)) drain(who[i - 1]);
    reap();
    if (!all_ready_logged &&
        std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.ready; })) {
      all_ready_logged = true;
      if (opt.on_all_ready) opt.on_all_ready();
    }
    if (first_failure_s >= 0 && !failure_announced) {
      // A peer's "rank 0 died" can arrive before rank 0's own exit is
      // reaped: announce once the root cause is not a consequence, or after
      // kAnnounceWaitS.
      const launch::FailureReport report = launch::BuildFailureReport(failures);
      if (!report.root_is_consequence || clock.Seconds() >= first_failure_s + kAnnounceWaitS) {
        failure_announced = true;
        out.cause = CauseLine(report);
        if (opt.on_group_failed) opt.on_group_failed(out.cause, restartable());
      }
    }
    now = clock.Seconds();
    switch (phase) {
      case Phase::kRunning:
        if (first_failure_s >= 0 && now >= first_failure_s + opt.grace_s) {
          begin_stop(now);
        } else if (ranks[0].exited && first_failure_s < 0) {
          // Rank 0 finished: the others leave on its shutdown descriptor.
          phase = Phase::kRest;
          phase_deadline = now + 2.0;
        }
        break;
      case Phase::kRank0:
        if (ranks[0].exited) {
          phase = Phase::kRest;
          phase_deadline = now + opt.grace_s;
        } else if (now >= phase_deadline) {
          LOG_WARN("launch", "rank 0 did not stop within {} s: stopping every rank",
                   opt.rank0_stop_s);
          enter_term(now);
        }
        break;
      case Phase::kRest:
        if (now >= phase_deadline) enter_term(now);
        break;
      case Phase::kTerm:
        if (now >= phase_deadline) {
          signal_all(SIGKILL);
          phase = Phase::kKill;
        }
        break;
      case Phase::kKill:
        break;
    }
  }
  for (auto& r : ranks) ::close(r.fd);
  if (first_failure_s >= 0 && !failure_announced) {
    out.cause = CauseLine(launch::BuildFailureReport(failures));
    if (opt.on_group_failed) opt.on_group_failed(out.cause, restartable());
  }

  const bool all_ok =
      std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.exit_code == 0; });
  if (first_failure_s < 0) {
    if (all_ok) return out;
    if (interrupt_signal != 0) {
      out.exit_code = 128 + interrupt_signal;
      return out;
    }
  }
  if (failures.empty()) {
    out.exit_code = all_ok ? 0 : 1;
    return out;
  }
  PrintReport(failures, opt);
  out.failed = true;
  out.exit_code = 1;
  out.restartable = first_failure_s >= 0 && restartable();
  if (out.cause.empty()) out.cause = CauseLine(launch::BuildFailureReport(failures));
  return out;
}

}  // namespace

int Supervise(const SupervisorOptions& opt,
              const std::function<int(int rank, RankReporter& reporter)>& rank_main) {
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  // A SIGKILL while this count rises is the OOM killer's (-1: unreadable).
  const int64_t oom_kills_at_start = launch::OomKillCount();

  int code = 0;
  for (int restarts = 0;; ++restarts) {
    GroupOutcome g = RunGroup(opt, rank_main, sfd, old_mask, oom_kills_at_start,
                              restarts < opt.max_restarts);
    code = g.exit_code;
    if (!g.failed || !g.restartable) break;
    LOG_WARN("launch", "restarting the rank group ({} of {} restarts) after: {}", restarts + 1,
             opt.max_restarts, g.cause);
    if (opt.before_restart) {
      Status s = opt.before_restart();
      if (!s.ok()) {
        LogStatus(s.WithStage("restart ranks"));
        if (opt.on_group_failed) opt.on_group_failed(g.cause, false);
        code = 1;
        break;
      }
    }
  }
  if (sfd >= 0) ::close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return code;
}

}  // namespace specd
