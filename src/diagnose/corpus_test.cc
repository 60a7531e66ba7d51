// Runs every log in tests/diagnose/corpus through the library and checks the
// result against the log's .expected.json (written by hand from the story the
// log tells; see tests/diagnose/make_corpus.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "diagnose/diagnose.h"

namespace specd::diagnose {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kCorpus = fs::path(SPECD_SOURCE_DIR) / "tests/diagnose/corpus";

std::vector<std::string> CorpusNames() {
  std::vector<std::string> names;
  if (!fs::is_directory(kCorpus)) return names;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    if (e.path().extension() == ".log") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class CorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusTest, FindsExpectedCause) {
  const std::string name = GetParam();
  std::ifstream in(kCorpus / (name + ".expected.json"));
  ASSERT_TRUE(in) << "missing " << name << ".expected.json";
  json want = json::parse(in);
  StatusOr<Diagnosis> got = DiagnoseFiles({(kCorpus / (name + ".log")).string()});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Diagnosis& d = *got;
  SCOPED_TRACE(FormatDiagnosisText(d));
  // The JSON rendering must always parse, whatever the log held.
  json out = json::parse(FormatDiagnosisJson(d));
  EXPECT_EQ(out["found"].get<bool>(), d.found);

  ASSERT_EQ(d.found, want.at("found").get<bool>());
  if (!d.found) {
    EXPECT_TRUE(out["cause"].is_null());
    return;
  }
  const Candidate& c = d.cause;
  if (want.contains("type")) {
    EXPECT_EQ(c.type, want["type"].get<std::string>());
  }
  if (want.contains("message_contains")) {
    std::string frag = want["message_contains"];
    EXPECT_NE((c.message + " " + c.details).find(frag), std::string::npos) << "message: " << c.message;
  }
  if (want.contains("process")) {
    EXPECT_EQ(c.process, want["process"].get<std::string>());
  }
  if (want.contains("rank")) {
    EXPECT_EQ(c.rank, want["rank"].get<int>());
  }
  if (want.contains("stage")) {
    EXPECT_EQ(c.stage, want["stage"].get<std::string>());
  }
  if (want.contains("signature")) {
    if (want["signature"].is_null()) {
      EXPECT_EQ(d.signature, "");
      EXPECT_TRUE(out["signature"].is_null());
    } else {
      EXPECT_EQ(d.signature, want["signature"].get<std::string>());
      EXPECT_FALSE(d.hint.empty());
    }
  }
  if (want.contains("hint_contains")) {
    EXPECT_NE(d.hint.find(want["hint_contains"].get<std::string>()), std::string::npos) << d.hint;
  }
  if (want.contains("function")) {
    ASSERT_TRUE(c.has_frame);
    EXPECT_EQ(c.frame.function, want["function"].get<std::string>());
    EXPECT_EQ(out["cause"]["function"], want["function"]);
  }
  if (want.contains("file_contains")) {
    EXPECT_NE(c.frame.file.find(want["file_contains"].get<std::string>()), std::string::npos)
        << c.frame.file;
  }
  if (want.contains("min_same_way")) {
    EXPECT_GE(d.same_way_count, want["min_same_way"].get<uint64_t>());
  }
  if (want.contains("min_consequences")) {
    EXPECT_GE(d.consequences_total, want["min_consequences"].get<uint64_t>());
    EXPECT_GE(out["consequences"].size(), 1u);
    for (const auto& k : out["consequences"]) {
      EXPECT_TRUE(k.contains("process") && k.contains("summary") && k.contains("file") &&
                  k.contains("line"));
    }
  }
  if (want.contains("missing_ranks")) {
    EXPECT_EQ(d.missing_ranks, want["missing_ranks"].get<std::vector<int>>());
  }
  if (want.contains("reversed")) {
    EXPECT_EQ(d.reversed, want["reversed"].get<bool>());
  }
  if (want.contains("truncated")) {
    EXPECT_EQ(c.truncated, want["truncated"].get<bool>());
  }
  if (want.contains("is_consequence")) {
    EXPECT_EQ(d.cause_is_consequence, want["is_consequence"].get<bool>());
  }
  // The cause never comes from logging noise or a consequence when a cause exists.
  EXPECT_FALSE(c.noise);
  if (!d.cause_is_consequence) {
    EXPECT_FALSE(c.consequence);
  }
  EXPECT_FALSE(c.evidence.empty());
  for (const Evidence& e : c.evidence) EXPECT_GT(e.line, 0u);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(CorpusNames()),
                         [](const auto& info) { return info.param; });

// Cases committed so far; the corpus only grows.
constexpr size_t kMinCorpusCases = 41;

// The keys FindsExpectedCause reads (see tests/diagnose/make_corpus.py). Cause
// keys describe the cause; a case that finds nothing has none of them.
const std::set<std::string> kCauseKeys = {
    "type",     "message_contains", "process",       "rank",      "signature",      "stage",
    "function", "file_contains",    "hint_contains", "truncated", "is_consequence", "min_same_way"};
const std::set<std::string> kOtherKeys = {"found", "min_consequences", "missing_ranks", "reversed"};

bool CiRun() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Every log has its expectation and every expectation its log; each
// expectation parses, uses only known keys and either names what identifies
// the cause or says there is none.
TEST(CorpusTest, CorpusIsComplete) {
  if (!fs::is_directory(kCorpus)) {
    if (CiRun()) FAIL() << "corpus directory missing: " << kCorpus;
    GTEST_SKIP() << "corpus directory missing: " << kCorpus;
  }
  std::set<std::string> logs, expected;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    const std::string file = e.path().filename().string();
    const std::string suffix = ".expected.json";
    if (e.path().extension() == ".log") {
      logs.insert(e.path().stem().string());
    } else if (file.size() > suffix.size() &&
               file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
      expected.insert(file.substr(0, file.size() - suffix.size()));
    } else {
      ADD_FAILURE() << "unexpected file in the corpus: " << file;
    }
  }
  for (const std::string& name : logs) {
    EXPECT_TRUE(expected.count(name)) << name << ".log has no " << name << ".expected.json";
  }
  for (const std::string& name : expected) {
    EXPECT_TRUE(logs.count(name)) << name << ".expected.json has no " << name << ".log";
  }
  EXPECT_GE(logs.size(), kMinCorpusCases) << "corpus directory: " << kCorpus;

  for (const std::string& name : expected) {
    SCOPED_TRACE(name + ".expected.json");
    std::ifstream in(kCorpus / (name + ".expected.json"));
    json want = json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(want.is_object()) << "does not parse as a JSON object";
    ASSERT_TRUE(want.contains("found") && want["found"].is_boolean()) << "needs \"found\": bool";
    size_t cause_keys = 0;
    for (const auto& [key, value] : want.items()) {
      EXPECT_TRUE(kCauseKeys.count(key) || kOtherKeys.count(key)) << "unknown key " << key;
      cause_keys += kCauseKeys.count(key);
    }
    if (want["found"].get<bool>()) {
      // A truncated traceback has no exception line; its frame names it.
      EXPECT_TRUE(want.contains("type") || want.contains("message_contains") ||
                  (want.contains("signature") && want["signature"].is_string()) ||
                  want.contains("function") || want.contains("file_contains"))
          << "a found cause must be named by its type, message, signature or frame";
    } else {
      EXPECT_EQ(cause_keys, 0u) << "says nothing was found but describes a cause";
    }
  }
}

}  // namespace
}  // namespace specd::diagnose
