// Test-only helpers for tests that compare against an external reference (a
// Python package in the project's virtual environment, ../shared/data, a
// tool such as mpirun). On a user's machine a missing reference skips the
// test with the reason; in CI (environment CI=true) it fails the test, so a
// green CI run never hides a reference test that did not run.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "base/env.h"

namespace specd::testing {

// True when the environment variable CI is "true" or "1".
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string(ci) == "true" || std::string(ci) == "1");
}

// The interpreter of the reference environment: $SPECD_PYTHON, else the
// checkout's .venv (made by scripts/setup-python.sh). "" if neither exists.
inline std::string ReferencePython() {
  if (auto p = GetEnv(EnvVar::kPython)) return *p;
  const std::string venv = std::string(SPECD_SOURCE_DIR) + "/.venv/bin/python";
  return std::filesystem::exists(venv) ? venv : "";
}

// Empty when ReferencePython() can import `module`; else why not.
inline std::string PythonModuleMissing(const std::string& module) {
  const std::string py = ReferencePython();
  if (py.empty()) return "no reference Python environment (.venv): run scripts/setup-python.sh";
  const std::string cmd = "'" + py + "' -c 'import " + module + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return "Python package '" + module + "' is not importable from " + py +
           " (run scripts/setup-python.sh)";
  }
  return "";
}

}  // namespace specd::testing

// Skips (user's machine) or fails (CI=true) the current test because a
// reference is missing. `msg` is streamed: SPECD_REFERENCE_MISSING("x " << y).
#define SPECD_REFERENCE_MISSING(msg)                                                   \
  do {                                                                                 \
    std::ostringstream specd_ref_msg_;                                                 \
    specd_ref_msg_ << msg;                                                             \
    if (::specd::testing::InCi()) {                                                    \
      GTEST_FAIL() << "reference missing in CI (CI=true): " << specd_ref_msg_.str();   \
    } else {                                                                           \
      GTEST_SKIP() << specd_ref_msg_.str();                                            \
    }                                                                                  \
  } while (0)
