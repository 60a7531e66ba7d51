// Tests of the runtime: the "tiny" fixture model (llama, hidden 64, 2 layers,
// vocab 256, safetensors) written once per test binary into a temporary
// folder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "modelgen/fixture.h"

namespace specd::testing_util {

inline const std::string& TinyModelPath() {
  static const std::string path = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd-runtime-XXXXXX").string();
    std::string dir = ::mkdtemp(tmpl.data());
    FixtureOptions o;
    o.preset = "tiny";
    o.format = "safetensors";
    o.out = dir + "/tiny";
    o.seed = 7;
    Status s = MakeFixture(o);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return o.out;
  }();
  return path;
}

}  // namespace specd::testing_util
