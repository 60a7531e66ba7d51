// Auto-shaped speculation remembers its drafter's acceptance between runs
// of `specd generate` (runtime/acceptance_cache.h), through the binary on the
// embedded demo pair: the first run starts blind and writes it, the next
// starts from it, --no-acceptance-cache does neither, and a corrupt file is
// named and ignored; serve writes it at shutdown.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::ServeProcess;
using testing::SpecdBinary;

class AcceptanceMemoryTest : public ::testing::Test {
 protected:
  // The demo pair (its trained EAGLE-3 head drafts from the first step with
  // the blind prior: a verify of 2 tokens costs ~1.1 decode steps there).
  json Generate(const std::string& extra, int* status) {
    const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
    const std::string out = RunCommand(
        "XDG_CACHE_HOME=" + dir_.path() + "/cache " + SpecdBinary() + " generate --model " +
            demo + " --speculative-algorithm EAGLE3 --draft-model " + demo + "/eagle3" +
            " --prompt 'Once upon a time' --max-tokens 32 --ignore-eos --json " + extra + " 2>" +
            dir_.path() + "/err.txt",
        status);
    return json::parse(out, nullptr, /*allow_exceptions=*/false);
  }
  std::string Err() { return RunCommand("cat " + dir_.path() + "/err.txt"); }
  std::vector<std::filesystem::path> Remembered() {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/cache/specd", ec))
      if (e.path().filename().string().rfind("acceptance-", 0) == 0) files.push_back(e.path());
    return files;
  }

  testing::TempDir dir_;
};

TEST_F(AcceptanceMemoryTest, TheNextRunStartsFromWhatThisOneLearned) {
  int status = -1;
  json first = Generate("", &status);
  ASSERT_EQ(status, 0) << Err();
  ASSERT_GT(first["stats"]["accept_hist"].size(), 1u) << "the first run should draft";
  EXPECT_TRUE(first["stats"]["acceptance_prior_p1"].is_null());
  ASSERT_EQ(Remembered().size(), 1u);

  json second = Generate("", &status);
  ASSERT_EQ(status, 0) << Err();
  ASSERT_TRUE(second["stats"]["acceptance_prior_p1"].is_number()) << Err();
  EXPECT_NE(Err().find("starting from earlier runs' acceptance"), std::string::npos) << Err();
  // The same text either way: a prior changes which steps draft, not output.
  EXPECT_EQ(second["token_ids"], first["token_ids"]);

  // Sampling is accepted less often than greedy decoding: its own memory.
  json sampled = Generate("--temperature 1 --seed 3", &status);
  ASSERT_EQ(status, 0) << Err();
  EXPECT_TRUE(sampled["stats"]["acceptance_prior_p1"].is_null());
  EXPECT_EQ(Remembered().size(), 2u);

  json off = Generate("--no-acceptance-cache", &status);
  ASSERT_EQ(status, 0) << Err();
  EXPECT_TRUE(off["stats"]["acceptance_prior_p1"].is_null());
  EXPECT_EQ(off["token_ids"], first["token_ids"]);
}

TEST_F(AcceptanceMemoryTest, ACorruptFileIsNamedAndIgnored) {
  int status = -1;
  ASSERT_EQ(Generate("", &status)["stats"]["acceptance_prior_p1"], nullptr);
  ASSERT_EQ(status, 0) << Err();
  const std::vector<std::filesystem::path> files = Remembered();
  ASSERT_EQ(files.size(), 1u);
  std::ofstream(files[0]) << "{\"format\": \"specd acceptance v1\", \"key\": ";  // torn
  json run = Generate("", &status);
  ASSERT_EQ(status, 0) << Err();
  EXPECT_TRUE(run["stats"]["acceptance_prior_p1"].is_null());
  EXPECT_NE(Err().find("ignoring " + files[0].string()), std::string::npos) << Err();
  // That run rewrote it: the one after starts from it again.
  EXPECT_TRUE(Generate("", &status)["stats"]["acceptance_prior_p1"].is_number()) << Err();
}

// serve remembers at shutdown what its requests taught it; the next server
// starts from it.
TEST_F(AcceptanceMemoryTest, ServeRemembersAtShutdown) {
  const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  const std::vector<std::string> args = {
      "serve", "--model", demo, "--port", "0", "--served-model-name", "demo", "--threads", "1",
      "--speculative-algorithm", "EAGLE3", "--draft-model", demo + "/eagle3"};
  const std::string env = "XDG_CACHE_HOME=" + dir_.path() + "/cache";
  {
    ServeProcess server(dir_.path() + "/serve1.log");
    std::string why;
    ASSERT_TRUE(server.Start(args, env, &why)) << why;
    httplib::Client c("127.0.0.1", server.port());
    for (int i = 0; i < 3; ++i) {
      auto res = c.Post("/v1/completions",
                        R"({"model": "demo", "prompt": "Once upon a time", "max_tokens": 24,
                            "temperature": 0})",
                        "application/json");
      ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    }
    EXPECT_TRUE(Remembered().empty()) << "written at shutdown, not before";
    server.Signal(SIGTERM);
    ASSERT_EQ(server.Wait(30), 0) << server.log();
    EXPECT_EQ(server.log().find("starting from earlier runs' acceptance"), std::string::npos);
  }
  ASSERT_EQ(Remembered().size(), 1u);
  ServeProcess again(dir_.path() + "/serve2.log");
  std::string why;
  ASSERT_TRUE(again.Start(args, env, &why)) << why;
  EXPECT_NE(again.log().find("starting from earlier runs' acceptance"), std::string::npos)
      << again.log();
  again.Signal(SIGTERM);
  EXPECT_EQ(again.Wait(30), 0) << again.log();
}

}  // namespace
}  // namespace specd
