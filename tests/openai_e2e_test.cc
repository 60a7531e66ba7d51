// End to end: real `specd serve` processes on free ports, driven by the
// official `openai` Python client, unmodified (tests/python/openai_e2e.py in
// the project's .venv). First a random-weight tiny Llama with the demo model's
// tokenizer (no chat template, so chat uses the fallback template); then the
// demo model served with its EAGLE-3 head, checked against the same model
// served without speculation.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::ServeProcess;

const std::string kKey = "test-key-123";

// Runs the client script against `port` (and `plain_port`, when not 0, as the
// non-speculative server of the same model); prints its check lines.
void RunClient(int port, int plain_port, const std::string& served_name, const ServeProcess& serve) {
  const std::string src = SPECD_SOURCE_DIR;
  std::string env = "SPECD_BASE_URL=http://127.0.0.1:" + std::to_string(port) +
                    "/v1 SPECD_API_KEY=" + kKey + " SPECD_MODEL=" + served_name;
  if (plain_port != 0) env += " SPECD_PLAIN_BASE_URL=http://127.0.0.1:" + std::to_string(plain_port) + "/v1";
  int st = 0;
  const std::string out = RunCommand(env + " '" + testing::ReferencePython() + "' '" + src +
                                         "/tests/python/openai_e2e.py' 2>&1",
                                     &st);
  std::printf("%s", out.c_str());  // one line per check of the client script
  EXPECT_EQ(st, 0) << out << "\nserver log:\n" << serve.log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
}

// Skips (fails in CI) when the client or the binary is missing.
#define REQUIRE_CLIENT()                                                                     \
  do {                                                                                       \
    const std::string why = testing::PythonModuleMissing("openai");                          \
    if (!why.empty()) SPECD_REFERENCE_MISSING(why);                                          \
    if (!fs::exists(testing::SpecdBinary()))                                                 \
      SPECD_REFERENCE_MISSING("the specd binary is not built at " << testing::SpecdBinary()); \
  } while (0)

TEST(OpenAiE2eTest, OfficialClientAgainstSpecdServe) {
  REQUIRE_CLIENT();
  const std::string tok_dir = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  ASSERT_TRUE(fs::exists(tok_dir + "/tokenizer.json")) << "models/demo/tokenizer.json is missing";

  // Tiny random weights at the demo tokenizer's vocabulary.
  testing::TempDir dir;
  auto cfg = FixturePreset("tiny");
  ASSERT_TRUE(cfg.ok());
  ModelConfig c = *cfg;
  c.vocab_size = 2048;
  c.max_seq_len = 512;
  c.bos_id = 2046;
  c.eos_ids = {2047};
  const std::string model = dir.path() + "/model";
  ASSERT_TRUE(WriteSafetensorsModel(c, RandomWeights(c, 3), DType::kF32, model).ok());
  fs::copy_file(tok_dir + "/tokenizer.json", model + "/tokenizer.json");
  if (fs::exists(tok_dir + "/tokenizer_config.json"))
    fs::copy_file(tok_dir + "/tokenizer_config.json", model + "/tokenizer_config.json");

  ServeProcess serve(dir.path() + "/serve.log");
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", model, "--port", "0", "--api-key", kKey,
                           "--served-model-name", "tiny-demo", "--threads", "2"},
                          "", &why))
      << why;
  RunClient(serve.port(), 0, "tiny-demo", serve);
  // SIGTERM: a clean shutdown with exit status 0.
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(20), 0) << serve.log();
}

// The demo model with its EAGLE-3 head behind the client: every check above,
// plus speculative greedy output equal to a plain server's.
TEST(OpenAiE2eTest, OfficialClientAgainstSpeculativeServe) {
  REQUIRE_CLIENT();
  const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  ASSERT_TRUE(fs::exists(demo + "/eagle3/config.json")) << "models/demo/eagle3 is missing";
  testing::TempDir dir;
  ServeProcess plain(dir.path() + "/plain.log"), spec(dir.path() + "/spec.log");
  std::string why;
  ASSERT_TRUE(plain.Start({"serve", "--model", demo, "--port", "0", "--api-key", kKey,
                           "--served-model-name", "demo", "--threads", "1"},
                          "", &why))
      << why;
  ASSERT_TRUE(spec.Start({"serve", "--model", demo, "--port", "0", "--api-key", kKey,
                          "--served-model-name", "demo", "--threads", "1",
                          "--speculative-algorithm", "EAGLE3", "--draft-model", demo + "/eagle3"},
                         "", &why))
      << why;
  RunClient(spec.port(), plain.port(), "demo", spec);
  spec.Signal(SIGTERM);
  plain.Signal(SIGTERM);
  EXPECT_EQ(spec.Wait(20), 0) << spec.log();
  EXPECT_EQ(plain.Wait(20), 0) << plain.log();
}

}  // namespace
}  // namespace specd
