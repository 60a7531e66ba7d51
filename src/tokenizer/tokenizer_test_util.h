// Test helpers: llama.cpp's tokenizer vectors and the Hugging Face tokenizer
// files from shared/data, and the independent Python reference
// (tests/python/encode.py, Hugging Face's `tokenizers`) run through popen.
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
#include "base/test_reference.h"

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

// A Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json)
// in ../shared/data/tokenizers: "llama2", "llama3" or "qwen3". "" if absent.
inline std::string SharedTokenizerDir(const std::string& name) {
  const std::string dir = SharedData() + "/tokenizers/" + name;
  return std::filesystem::exists(dir + "/tokenizer.json") ? dir : "";
}

struct Reference {
  std::vector<int32_t> ids;
  std::string decoded;
};

// Encodes `texts` with the Python reference (Hugging Face's `tokenizers`, run
// by tests/python/encode.py in the project's .venv). Empty with *why set
// when the environment or the package is unavailable or the script fails.
inline std::vector<Reference> RunPythonReference(const std::string& model_dir,
                                                 const std::vector<std::string>& texts,
                                                 bool add_special, std::string* why) {
  *why = ::specd::testing::PythonModuleMissing("tokenizers");
  if (!why->empty()) return {};
  const std::string script = std::string(SPECD_SOURCE_DIR) + "/tests/python/encode.py";
  const std::string input = ::testing::TempDir() + "/specd_tok_ref_input.json";
  {
    std::ofstream f(input, std::ios::binary);
    f << nlohmann::json(texts).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const std::string cmd = "'" + ::specd::testing::ReferencePython() + "' '" + script + "' '" +
                          model_dir + "'" + (add_special ? " --add-special" : "") + " < '" + input +
                          "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *why = "cannot run " + cmd;
    return {};
  }
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0 || out.empty()) {
    *why = "tests/python/encode.py failed: exit status " + std::to_string(rc);
    return {};
  }
  std::vector<Reference> refs;
  for (const auto& item : nlohmann::json::parse(out)) {
    refs.push_back({item["ids"].get<std::vector<int32_t>>(), item["decoded"].get<std::string>()});
  }
  return refs;
}

// Hard cases every tokenizer reference test covers: multilingual text,
// code, whitespace runs, numbers, contractions, combining marks, and the
// empty and whitespace-only strings.
inline const std::vector<std::string>& CommonHardTexts() {
  static const std::vector<std::string> kTexts = {
      "Hello world",
      " Hello world",
      "Hello  world   with    runs",
      "trailing spaces   ",
      "\n\n\nnewlines\r\n\r\nand\ttabs\t\t",
      "I'm sure they'RE here, it's John's; we'LL see, you'd've",
      "3.14159 1234567890 1,000,000 0x1F 42nd 2024-06-01",
      "def f(x):\n    return x ** 2  # square\n\nclass A:\n\tpass\n",
      "for (int i = 0; i < n; ++i) { sum += a[i]; }",
      "Größe, Straße, naïve café, résumé, coöperate",
      "日本語のテキストと中文文本，还有한국어 텍스트。",
      "Привет, мир! Это тест. Ελληνικά κείμενα.",
      "مرحبا بالعالم — नमस्ते दुनिया — สวัสดีชาวโลก",
      "emoji 🦙🚀😶‍🌫️👍🏽 flags 🇫🇷🇯🇵 and ✅",
      "e\u0301 combining (NFD) vs \u00e9 precomposed; \u212b angstrom",
      "non\u00a0breaking\u3000ideographic\u2009thin space",
      "    indented\n        more\n",
      "''''''```````\"\"\"\"......!!!!!!??????",
      "",
      " ",
      "   ",
      "\t",
      "a",
  };
  return kTexts;
}

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace specd::tok::testing
