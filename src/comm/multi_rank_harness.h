// Test helper: runs one function per rank, either in forked child processes
// (the real deployment shape) or in threads of this process (so ThreadSanitizer
// can check the shm protocol's memory ordering).
//
// The body reports failures with ctx.Fail(...); a forked child sends them to
// the parent through a pipe and exits with status 1 (it never returns into
// the test framework). Each rank also gets `shared_bytes` of memory that the
// parent can read afterwards (for cross-rank bitwise comparisons).
// The parent kills every child still running after `timeout_s`, so a protocol
// bug fails the test instead of hanging it.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace specd::testing {

struct RankContext {
  int rank = 0;
  char* shared = nullptr;  // this rank's shared_bytes
  std::function<void(const std::string&)> fail;
  void Fail(const std::string& msg) const { fail("rank " + std::to_string(rank) + ": " + msg); }
};

struct RunResult {
  std::vector<std::string> failures;  // from Fail(), crashes and timeouts
  std::vector<int> exit_codes;        // per rank; -signal if killed by a signal
  std::vector<char> shared;           // world * shared_bytes, copied after the run
  bool timed_out = false;
  bool ok() const { return failures.empty(); }
  std::string Summary() const {
    std::string s;
    for (const auto& f : failures) s += f + "\n";
    return s;
  }
};

struct RunOptions {
  size_t shared_bytes = 0;
  double timeout_s = 60.0;
  // Forked mode: SIGKILL this rank `kill_after_s` after start (-1: none).
  int kill_rank = -1;
  double kill_after_s = 0.0;
};

// Forks `world` children running body(ctx) for rank 0..world-1.
inline RunResult RunForked(int world, const std::function<void(RankContext&)>& body,
                           const RunOptions& opt = {}) {
  RunResult res;
  const size_t total = std::max<size_t>(1, world * opt.shared_bytes);
  char* shared = static_cast<char*>(
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<pid_t> pids(world, -1);
  std::vector<int> pipes(world, -1);
  for (int r = 0; r < world; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      res.failures.push_back("pipe failed");
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int failures = 0;
      RankContext ctx;
      ctx.rank = r;
      ctx.shared = shared + r * opt.shared_bytes;
      ctx.fail = [&](const std::string& m) {
        ++failures;
        std::string line = m + "\n";
        (void)!write(fds[1], line.data(), line.size());
      };
      body(ctx);
      _exit(failures == 0 ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<std::string> out(world);
  std::vector<bool> done(world, false);
  res.exit_codes.assign(world, 0);
  int remaining = world;
  bool killed_victim = false;
  while (remaining > 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (opt.kill_rank >= 0 && !killed_victim && elapsed >= opt.kill_after_s) {
      kill(pids[opt.kill_rank], SIGKILL);
      killed_victim = true;
    }
    if (elapsed > opt.timeout_s && !res.timed_out) {
      res.timed_out = true;
      res.failures.push_back("timeout: killing ranks still running after " +
                             std::to_string(opt.timeout_s) + " s");
      for (int r = 0; r < world; ++r) {
        if (!done[r]) kill(pids[r], SIGKILL);
      }
    }
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      char buf[4096];
      pollfd p{pipes[r], POLLIN, 0};
      while (poll(&p, 1, 0) > 0) {
        ssize_t n = read(pipes[r], buf, sizeof(buf));
        if (n <= 0) break;
        out[r].append(buf, n);
      }
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        ssize_t n;
        while ((n = read(pipes[r], buf, sizeof(buf))) > 0) out[r].append(buf, n);
        close(pipes[r]);
        done[r] = true;
        --remaining;
        res.exit_codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        const bool expected_kill = r == opt.kill_rank && killed_victim;
        if (!expected_kill && res.exit_codes[r] != 0) {
          res.failures.push_back("rank " + std::to_string(r) + " exited with " +
                                 std::to_string(res.exit_codes[r]));
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int r = 0; r < world; ++r) {
    size_t pos = 0;
    while (pos < out[r].size()) {
      size_t nl = out[r].find('\n', pos);
      if (nl == std::string::npos) nl = out[r].size();
      if (nl > pos) res.failures.push_back(out[r].substr(pos, nl - pos));
      pos = nl + 1;
    }
  }
  res.shared.assign(shared, shared + world * opt.shared_bytes);
  munmap(shared, total);
  return res;
}

// Runs body(ctx) in `world` threads of this process.
inline RunResult RunThreads(int world, const std::function<void(RankContext&)>& body,
                            const RunOptions& opt = {}) {
  RunResult res;
  std::vector<char> shared(std::max<size_t>(1, world * opt.shared_bytes));
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.shared = shared.data() + r * opt.shared_bytes;
      ctx.fail = [&](const std::string& m) {
        std::lock_guard<std::mutex> lock(mu);
        res.failures.push_back(m);
      };
      body(ctx);
    });
  }
  for (auto& t : threads) t.join();
  res.exit_codes.assign(world, 0);
  res.shared.assign(shared.begin(), shared.begin() + world * opt.shared_bytes);
  return res;
}

}  // namespace specd::testing
