// Runs every log in tests/diagnose/corpus through the library and checks the
// result against the log's .expected.json (written by hand from the story the
// log tells; see tests/diagnose/make_corpus.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

TEST(CorpusTest, CorpusIsPresent) {
  EXPECT_GE(CorpusNames().size(), 20u) << "corpus directory: " << kCorpus;
}

}  // namespace
}  // namespace specd::diagnose
