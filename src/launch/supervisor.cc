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

#include "base/clock.h"
#include "base/logging.h"

namespace specd {
namespace {

// Status-pipe lines: "READY" or "ERROR\t<stage>\t<code>\t<hint>\t<message>",
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

bool IsConsequence(const ObservedFailure& f) {
  return f.killed_by_supervisor || f.code == "DeadlineExceeded" || f.code == "Unavailable" ||
         f.code == "Cancelled";
}

// Index of the root cause: the earliest failure that is not a consequence,
// else the earliest failure.
size_t RootCause(const std::vector<ObservedFailure>& fs) {
  size_t best = fs.size();
  for (size_t i = 0; i < fs.size(); ++i) {
    if (IsConsequence(fs[i])) continue;
    if (best == fs.size() || fs[i].time_s < fs[best].time_s) best = i;
  }
  if (best != fs.size()) return best;
  best = 0;
  for (size_t i = 1; i < fs.size(); ++i)
    if (fs[i].time_s < fs[best].time_s) best = i;
  return best;
}

std::string Describe(const ObservedFailure& f) {
  std::string s;
  if (!f.message.empty()) {
    s = (f.code.empty() ? "" : f.code + ": ") + f.message;
  } else if (f.signal > 0) {
    s = std::string("killed by signal ") + std::to_string(f.signal) + " (" +
        (sigabbrev_np(f.signal) ? std::string("SIG") + sigabbrev_np(f.signal) : "?") + ")";
  } else {
    s = "exited with code " + std::to_string(f.exit_code);
  }
  return s;
}

std::string DefaultHint(const ObservedFailure& f) {
  if (!f.hint.empty()) return f.hint;
  if (f.signal == SIGKILL)
    return "SIGKILL usually means the OOM killer or an operator: check `dmesg` and memory use";
  if (f.signal == SIGSEGV || f.signal == SIGABRT || f.signal == SIGBUS)
    return "the rank crashed: this is a bug in specd, please report it with this log";
  return "";
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

void RankReporter::Fail(const Status& s) {
  Send("ERROR\t" + Clean(s.stage()) + "\t" + StatusCodeName(s.code()) + "\t" + Clean(s.hint()) +
       "\t" + Clean(s.message()));
}

std::string FormatFailureText(const std::vector<ObservedFailure>& fs) {
  if (fs.empty()) return "";
  size_t root = RootCause(fs);
  const ObservedFailure& r = fs[root];
  std::string out = "==== specd: rank " + std::to_string(r.rank) + " failed";
  if (!r.stage.empty()) out += " during '" + r.stage + "'";
  out += " (root cause) ====\n";
  out += "  rank:    " + std::to_string(r.rank) + "\n";
  out += "  stage:   " + (r.stage.empty() ? std::string("(process exit)") : r.stage) + "\n";
  out += "  error:   " + Describe(r) + "\n";
  std::string hint = DefaultHint(r);
  if (!hint.empty()) out += "  hint:    " + hint + "\n";
  std::vector<size_t> rest;
  for (size_t i = 0; i < fs.size(); ++i)
    if (i != root) rest.push_back(i);
  std::sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return fs[a].time_s < fs[b].time_s; });
  if (!rest.empty()) {
    out += "  consequences (" + std::to_string(rest.size()) + "):\n";
    for (size_t i : rest) {
      const ObservedFailure& f = fs[i];
      out += "    rank " + std::to_string(f.rank);
      if (!f.stage.empty()) out += " [" + f.stage + "]";
      out += " +" + std::to_string(static_cast<int>((f.time_s - r.time_s) * 1000)) + " ms: ";
      out += f.killed_by_supervisor ? "stopped by the supervisor" : Describe(f);
      out += "\n";
    }
  }
  return out;
}

std::string FormatFailureJson(const std::vector<ObservedFailure>& fs) {
  if (fs.empty()) return "{\"failed\":false}";
  size_t root = RootCause(fs);
  auto one = [&](const ObservedFailure& f) {
    std::string s = "{\"rank\":" + std::to_string(f.rank) + ",\"stage\":\"" + JsonEscape(f.stage) +
                    "\",\"code\":\"" + JsonEscape(f.code) + "\",\"message\":\"" +
                    JsonEscape(Describe(f)) + "\",\"hint\":\"" + JsonEscape(DefaultHint(f)) +
                    "\",\"time_s\":" + std::to_string(f.time_s) +
                    ",\"exit_code\":" + std::to_string(f.exit_code) +
                    ",\"signal\":" + std::to_string(f.signal) +
                    ",\"stopped_by_supervisor\":" + (f.killed_by_supervisor ? "true" : "false") + "}";
    return s;
  };
  std::string out = "{\"failed\":true,\"root_cause\":" + one(fs[root]) + ",\"consequences\":[";
  bool first = true;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (i == root) continue;
    if (!first) out += ",";
    first = false;
    out += one(fs[i]);
  }
  return out + "]}";
}

int Supervise(const SupervisorOptions& opt,
              const std::function<int(int rank, RankReporter& reporter)>& rank_main) {
  const int world = opt.world;
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  struct Rank {
    pid_t pid = -1;
    int fd = -1;
    std::string buf;
    bool ready = false, exited = false, reported_error = false;
    int failure = -1;  // index into failures
  };
  std::vector<Rank> ranks(world);
  std::vector<ObservedFailure> failures;
  Stopwatch clock;
  const pid_t supervisor_pid = getpid();

  for (int r = 0; r < world; ++r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      LOG_ERROR("launch", "cannot create a status pipe for rank {}: {}", r, strerror(errno));
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      LOG_ERROR("launch", "cannot start rank {}: fork failed: {}", r, strerror(errno));
      ::close(p[0]);
      ::close(p[1]);
      for (int q = 0; q < r; ++q) kill(ranks[q].pid, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != supervisor_pid) _exit(1);  // supervisor already gone
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      if (sfd >= 0) ::close(sfd);
      for (int q = 0; q < r; ++q) ::close(ranks[q].fd);
      ::close(p[0]);
      SetLogRank(r);
      RankReporter reporter(r, p[1]);
      int code = rank_main(r, reporter);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    ::close(p[1]);
    ranks[r].pid = pid;
    ranks[r].fd = p[0];
  }

  bool all_ready_logged = false, interrupted = false;
  double first_failure_s = -1, term_sent_s = -1;
  bool kill_sent = false;
  int interrupt_signal = 0;

  auto handle_line = [&](int r, const std::string& line) {
    Rank& rk = ranks[r];
    if (line == "READY") {
      rk.ready = true;
      return;
    }
    auto f = SplitTabs(line);
    if (f.size() >= 5 && f[0] == "ERROR") {
      ObservedFailure of;
      of.rank = r;
      of.stage = f[1];
      of.code = f[2];
      of.hint = f[3];
      of.message = f[4];
      of.time_s = clock.Seconds();
      of.killed_by_supervisor = term_sent_s >= 0;
      rk.reported_error = true;
      rk.failure = static_cast<int>(failures.size());
      failures.push_back(of);
      if (first_failure_s < 0) first_failure_s = of.time_s;
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
        if (ranks[r].pid != pid) continue;
        drain(r);
        ranks[r].exited = true;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        if (code == 0) break;
        if (ranks[r].failure >= 0) {
          failures[ranks[r].failure].exit_code = code;
          failures[ranks[r].failure].signal = sig;
        } else {
          ObservedFailure of;
          of.rank = r;
          of.exit_code = code;
          of.signal = sig;
          of.time_s = clock.Seconds();
          of.killed_by_supervisor = term_sent_s >= 0 || interrupted;
          ranks[r].failure = static_cast<int>(failures.size());
          failures.push_back(of);
          if (first_failure_s < 0 && !interrupted) first_failure_s = of.time_s;
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
    for (auto& r : ranks)
      if (!r.exited) kill(r.pid, sig);
  };

  while (alive() > 0) {
    std::vector<pollfd> pfds;
    pfds.push_back({sfd, POLLIN, 0});
    std::vector<int> who;
    for (int r = 0; r < world; ++r) {
      if (ranks[r].exited) continue;
      pfds.push_back({ranks[r].fd, POLLIN, 0});
      who.push_back(r);
    }
    int timeout_ms = -1;
    double now = clock.Seconds();
    if (first_failure_s >= 0 && term_sent_s < 0)
      timeout_ms = std::max(0, static_cast<int>((first_failure_s + opt.grace_s - now) * 1000));
    else if (term_sent_s >= 0 && !kill_sent)
      timeout_ms = std::max(0, static_cast<int>((term_sent_s + 0.5 - now) * 1000));
    int n = poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (pfds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
          if (!interrupted) {
            LOG_INFO("launch", "received {}: stopping {} ranks",
                     si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM", alive());
          }
          interrupted = true;
          interrupt_signal = static_cast<int>(si.ssi_signo);
          signal_all(SIGTERM);
          if (term_sent_s < 0) term_sent_s = clock.Seconds();
        }
      }
    }
    for (size_t i = 1; i < pfds.size(); ++i)
      if (pfds[i].revents & (POLLIN | POLLHUP)) drain(who[i - 1]);
    reap();
    if (!all_ready_logged && std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.ready; })) {
      all_ready_logged = true;
      if (opt.on_all_ready) opt.on_all_ready();
    }
    now = clock.Seconds();
    if (first_failure_s >= 0 && term_sent_s < 0 && now >= first_failure_s + opt.grace_s) {
      signal_all(SIGTERM);
      term_sent_s = now;
    } else if (term_sent_s >= 0 && !kill_sent && now >= term_sent_s + 0.5) {
      signal_all(SIGKILL);
      kill_sent = true;
    }
  }
  for (auto& r : ranks) ::close(r.fd);
  if (sfd >= 0) ::close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  if (interrupted && first_failure_s < 0) return 128 + interrupt_signal;
  if (failures.empty()) return 0;
  std::string text = FormatFailureText(failures);
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  if (!opt.report_file.empty()) {
    std::ofstream f(opt.report_file);
    f << FormatFailureJson(failures) << "\n";
    if (!f) LOG_WARN("launch", "cannot write the failure report to {}", opt.report_file);
  }
  return 1;
}

}  // namespace specd
