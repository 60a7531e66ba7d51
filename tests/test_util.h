// Helpers shared by the end-to-end tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/test_reference.h"

namespace specd::testing {

inline std::string SharedData() { return SPECD_SHARED_DATA; }
inline bool HaveSharedData() { return std::filesystem::exists(SharedData() + "/models"); }

// Skips (user's machine) or fails (CI=true) when ../shared/data is absent.
#define SKIP_WITHOUT_SHARED_DATA()                                                       \
  if (!::specd::testing::HaveSharedData())                                               \
  SPECD_REFERENCE_MISSING("shared test data not found at " << ::specd::testing::SharedData() \
                          << " (golden models live outside the repository)")

// A fresh temporary directory, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string SpecdBinary() { return std::string(SPECD_BINARY_DIR) + "/specd"; }

// Runs a shell command, returns its stdout; *status gets the exit status.
inline std::string RunCommand(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

}  // namespace specd::testing
