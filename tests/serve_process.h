// A `specd serve` child process for end-to-end tests: started on a free port
// (`--port 0`; the port is read from its log), healthy once /health says 200,
// then signalled and reaped by the test. Killed at destruction if still
// running.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace specd::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ServeProcess {
 public:
  // stderr of the server goes to `log` (the caller's file; not removed).
  explicit ServeProcess(std::string log) : log_(std::move(log)) {}
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Starts `specd ARGS` (`env`, as NAME=VALUE, is added to its environment)
  // and waits up to 60 s for /health 200. False, with the log in *why, when
  // the process exits first or never becomes healthy.
  bool Start(const std::vector<std::string>& args, const std::string& env, std::string* why) {
    return Start(args, std::vector<std::string>{env}, why);
  }
  // The same with several NAME=VALUE entries.
  bool Start(const std::vector<std::string>& args, const std::vector<std::string>& env,
             std::string* why) {
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stderr);
      (void)f;
      for (const std::string& e : env) {
        if (!e.empty()) ::putenv(const_cast<char*>(e.c_str()));
      }
      std::vector<char*> argv;
      const std::string bin = SpecdBinary();
      argv.push_back(const_cast<char*>(bin.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 1200; ++i) {
      std::smatch m;
      const std::string log = ReadFile(log_);
      if (port_ == 0 && std::regex_search(log, m, listening)) port_ = std::stoi(m[1]);
      if (port_ != 0) {
        httplib::Client c("127.0.0.1", port_);
        auto res = c.Get("/health");
        if (res && res->status == 200) return true;
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        early_exit_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        *why = "specd serve exited early:\n" + ReadFile(log_);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *why = "specd serve not healthy after 60 s:\n" + ReadFile(log_);
    return false;
  }

  // Waits up to `secs` for the process to exit: its exit status (128 + signal
  // when killed), or -1 when it is still running.
  int Wait(double secs) {
    if (pid_ <= 0) return -1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  void Signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  int port() const { return port_; }
  // The child's process id (-1 once reaped).
  pid_t pid() const { return pid_; }
  // The exit status when Start saw the process exit before /health said 200.
  int early_exit() const { return early_exit_; }
  std::string log() const { return ReadFile(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  int early_exit_ = -1;
};

// Entries of /dev/shm that specd could have created.
inline int ShmEntries() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
    n += e.path().filename().string().find("specd") != std::string::npos;
  return n;
}

struct StreamResult {
  std::string sse;            // the raw server-sent events
  double error_after_s = -1;  // from on_first's return to the first error event
};

// POSTs `body` (a streaming /v1/completions request) and collects the
// events; `on_first` (may be empty) runs once the first token event arrived.
inline StreamResult StreamCompletion(int port, const std::string& body,
                                     const std::function<void()>& on_first) {
  using Clock = std::chrono::steady_clock;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  StreamResult r;
  bool first = true;
  Clock::time_point t0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    r.sse.append(data, n);
    if (first && r.sse.find("\"choices\"") != std::string::npos) {
      first = false;
      if (on_first) on_first();
      t0 = Clock::now();
    }
    if (!first && r.error_after_s < 0 && r.sse.find("data: {\"error\"") != std::string::npos)
      r.error_after_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return true;
  };
  (void)c.send(req);
  return r;
}

}  // namespace specd::testing
