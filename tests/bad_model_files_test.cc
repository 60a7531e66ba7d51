// Start-up refuses damaged model files with a clear error (and a way to
// proceed on purpose): a NaN in a norm weight (--check-tensors off loads it
// anyway, and generation then stops at the first non-finite logits), a
// broken tokenizer.json next to the weights (serve --no-tokenizer serves
// token ids anyway). Real `specd` processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::ServeProcess;
using testing::SpecdBinary;

class BadModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
    model_ = dir_.path() + "/tiny";
    int st = 0;
    const std::string out = RunCommand(SpecdBinary() + " make-model --preset tiny --format "
                                           "safetensors --out " + model_ + " --seed 7 2>&1",
                                       &st);
    ASSERT_EQ(st, 0) << out;
  }
  testing::TempDir dir_;
  std::string model_;
};

TEST_F(BadModelFilesTest, NanInANormWeightStopsGenerateUnlessChecksAreOff) {
  // The final norm is all ones in a fresh fixture: find 64 floats of 1.0 at
  // the end of the data and poison the first of the last such run.
  const std::string file = model_ + "/model.safetensors";
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  std::string ones;
  const float one = 1.0f;
  for (int i = 0; i < 64; ++i) ones.append(reinterpret_cast<const char*>(&one), 4);
  const size_t at = bytes.rfind(ones);
  ASSERT_NE(at, std::string::npos);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + at, &nan, 4);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

  const std::string gen = SpecdBinary() + " generate --model " + model_ +
                          " --prompt-ids 1,2,3 -n 4 --threads 1 --json";
  int st = 0;
  std::string out = RunCommand(gen + " 2>&1", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("NaN or Inf"), std::string::npos) << out;
  EXPECT_NE(out.find("norm"), std::string::npos) << out;
  // With the scan off the model loads, and the NaN is caught where it
  // reaches the logits.
  out = RunCommand(gen + " --check-tensors off 2>&1", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("logits of request #1 at position 2 contain NaN"), std::string::npos) << out;
}

TEST_F(BadModelFilesTest, BrokenTokenizerStopsServeUnlessNoTokenizerIsAsked) {
  std::ofstream(model_ + "/tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2";
  ServeProcess refused(dir_.path() + "/refused.log");
  std::string why;
  ASSERT_FALSE(refused.Start({"serve", "--model", model_, "--port", "0", "--threads", "1"}, "", &why))
      << "serve started with a broken tokenizer.json";
  EXPECT_NE(refused.early_exit(), 0);
  EXPECT_NE(why.find("tokenizer"), std::string::npos) << why;
  EXPECT_NE(why.find("--no-tokenizer"), std::string::npos) << why;

  ServeProcess served(dir_.path() + "/served.log");
  ASSERT_TRUE(served.Start({"serve", "--model", model_, "--port", "0", "--threads", "1",
                            "--no-tokenizer"},
                           "", &why))
      << why;
  served.Signal(SIGTERM);
  EXPECT_EQ(served.Wait(20), 0) << served.log();
}

}  // namespace
}  // namespace specd
