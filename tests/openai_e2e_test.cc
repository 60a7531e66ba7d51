// End to end: a real `specd serve` process on a free port, driven by the
// official `openai` npm client (tests/node/openai_e2e.mjs). The model is a
// random-weight tiny Llama with the demo model's tokenizer (no chat
// template, so chat uses the fallback template).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "loader/fixture.h"
#include "loader/model_writer.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::ServeProcess;

TEST(OpenAiE2eTest, OfficialClientAgainstSpecdServe) {
  const std::string src = SPECD_SOURCE_DIR;
  const std::string node_dir = src + "/tests/node";
  int st = 0;
  RunCommand("node --version 2>/dev/null", &st);
  if (st != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(node_dir + "/node_modules/openai"))
    GTEST_SKIP() << "the openai npm package is not installed (cd tests/node && npm install)";
  if (!fs::exists(std::string(SPECD_BINARY_DIR) + "/specd"))
    GTEST_SKIP() << "the specd binary is not built";
  const std::string tok_dir = src + "/models/demo";
  if (!fs::exists(tok_dir + "/tokenizer.json"))
    GTEST_SKIP() << "models/demo/tokenizer.json is missing";

  // Tiny random weights at the demo tokenizer's vocabulary.
  std::string tmpl = (fs::temp_directory_path() / "specd-e2e-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  auto cfg = FixturePreset("tiny");
  ASSERT_TRUE(cfg.ok());
  ModelConfig c = *cfg;
  c.vocab_size = 2048;
  c.max_seq_len = 512;
  c.bos_id = 2046;
  c.eos_ids = {2047};
  const std::string model = dir + "/model";
  ASSERT_TRUE(WriteSafetensorsModel(c, RandomWeights(c, 3), DType::kF32, model).ok());
  fs::copy_file(tok_dir + "/tokenizer.json", model + "/tokenizer.json");
  if (fs::exists(tok_dir + "/tokenizer_config.json"))
    fs::copy_file(tok_dir + "/tokenizer_config.json", model + "/tokenizer_config.json");

  const std::string key = "test-key-123";
  ServeProcess serve(dir + "/serve.log");
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", model, "--port", "0", "--api-key", key,
                           "--served-model-name", "tiny-demo", "--threads", "2"},
                          "", &why))
      << why;
  const std::string cmd = "cd '" + node_dir + "' && SPECD_BASE_URL=http://127.0.0.1:" +
                          std::to_string(serve.port()) + "/v1 SPECD_API_KEY=" + key +
                          " SPECD_MODEL=tiny-demo node openai_e2e.mjs 2>&1";
  const std::string out = RunCommand(cmd, &st);
  std::printf("%s", out.c_str());  // one line per check of the node script
  EXPECT_EQ(st, 0) << out << "\nserver log:\n" << serve.log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  // SIGTERM: a clean shutdown with exit status 0.
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(20), 0) << serve.log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace specd
