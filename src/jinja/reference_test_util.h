// Test-only: renders chat-template cases with the reference renderer,
// jinja2 set up as transformers' apply_chat_template sets it up
// (tests/python/render_template.py), in one Python process for all cases.
// Callers check testing::PythonModuleMissing("jinja2") first.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/test_reference.h"

namespace specd::testing {

// cases: [{"template": "...", "context": {...}}, ...]. Returns one
// {"ok": true, "text": ...} or {"ok": false, "error": ...} per case, or a
// non-array (discarded JSON) when the reference could not run.
inline nlohmann::ordered_json RenderWithReference(const nlohmann::ordered_json& cases) {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(SPECD_SOURCE_DIR) / "tests/python/render_template.py";
  const fs::path in = fs::temp_directory_path() / ("specd_jinja_cases_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(in, std::ios::binary);
    out << cases.dump();
  }
  const std::string cmd = "'" + ReferencePython() + "' '" + script.string() + "' < '" + in.string() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  std::string output;
  if (p != nullptr) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
    pclose(p);
  }
  fs::remove(in);
  return nlohmann::ordered_json::parse(output, nullptr, false);
}

}  // namespace specd::testing
