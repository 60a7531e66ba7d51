#include "app/bench_child.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "app/commands.h"

extern char** environ;

namespace specd::app {

StatusOr<std::vector<std::string>> SplitFlags(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;  // an argument is open (possibly empty: "")
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (quote == '\'') {
      if (ch == '\'') quote = 0;
      else cur += ch;
    } else if (quote == '"') {
      if (ch == '"') quote = 0;
      else if (ch == '\\' && i + 1 < s.size()) cur += s[++i];
      else cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      have = true;
    } else if (ch == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      have = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (quote != 0) return InvalidArgumentError(fmt::format("unterminated {} quote", quote));
  if (have) out.push_back(cur);
  return out;
}

Status CheckGenerateFlags(const std::vector<std::string>& args) {
  CLI::App check{"check"};
  int unused = 0;
  AddGenerateCommand(check, &unused);
  check.get_subcommand("generate")->callback([] {});
  std::vector<std::string> rev = {"generate"};
  rev.insert(rev.end(), args.begin(), args.end());
  std::reverse(rev.begin(), rev.end());  // CLI11 consumes a vector from the back
  try {
    check.parse(rev);
  } catch (const CLI::CallForHelp&) {
    return InvalidArgumentError("--help is not an engine flag");
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return Status::Ok();
}

namespace {

std::string TailLines(const std::string& text, int n) {
  size_t pos = text.size();
  while (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int i = 0; i < n && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return text.substr(pos == 0 ? 0 : pos + 1);
}

}  // namespace

StatusOr<nlohmann::json> RunSelfJson(const std::vector<std::string>& args) {
  char err_path[] = "/tmp/specd-bench-XXXXXX";
  int err_fd = ::mkstemp(err_path);
  if (err_fd < 0) return ErrnoError("bench: cannot create a temporary file", errno);
  ::unlink(err_path);
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(err_fd);
    return ErrnoError("bench: pipe", errno);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<std::string> argv_s = {"specd"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_fd);
    return ErrnoError("bench: cannot start /proc/self/exe", rc);
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(out_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(out_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string err;
  ::lseek(err_fd, 0, SEEK_SET);
  while (true) {
    ssize_t n = ::read(err_fd, buf, sizeof(buf));
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
  }
  ::close(err_fd);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                        : fmt::format("signal {}", WTERMSIG(status));
    return InternalError(fmt::format("child run failed ({}); its last log lines:\n{}", how,
                                     TailLines(err, 12)));
  }
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') last = line;
  if (last.empty())
    return InternalError("child run printed no JSON object; its last log lines:\n" +
                         TailLines(err, 12));
  try {
    return nlohmann::json::parse(last);
  } catch (const std::exception& e) {
    return InternalError(std::string("child run printed invalid JSON: ") + e.what());
  }
}

double LoadAverage1() {
  std::ifstream in("/proc/loadavg");
  double v = -1;
  if (!(in >> v)) return -1;
  return v;
}

}  // namespace specd::app
