// Checkpoints whose parts disagree are refused at load with the field, the
// tensor and what was expected, never run on a guess: a config with fewer
// layers than the file holds, a GGUF header that counts one tensor less than
// it describes, compressed-tensors settings that contradict the file, a
// Kimi-K2.5 config whose top level contradicts its text_config, two names
// over one tensor's bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/checkpoint.h"
#include "loader/test_util.h"
#include "modelgen/compressed_tensors_writer.h"
#include "modelgen/fixture.h"

namespace specd {
namespace {

using json = nlohmann::json;
using testing_util::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Edits config.json of the folder `dir` in place.
template <typename Edit>
void EditConfig(const std::string& dir, Edit edit) {
  json j = json::parse(Slurp(dir + "/config.json"));
  edit(j);
  Spit(dir + "/config.json", j.dump(2));
}

void ExpectRefused(const std::string& path, const std::vector<std::string>& parts) {
  auto ck = OpenCheckpoint(path);
  ASSERT_FALSE(ck.ok()) << path << " loaded";
  for (const std::string& p : parts) {
    EXPECT_NE(ck.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << ck.status().ToString();
  }
}

std::string Fixture(const TempDir& dir, const std::string& preset, const std::string& format,
                    const std::string& name) {
  FixtureOptions fo;
  fo.preset = preset;
  fo.format = format;
  fo.out = dir / name;
  fo.seed = 3;
  const Status s = MakeFixture(fo);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return fo.out;
}

TEST(InconsistentModelTest, FewerLayersInTheConfigThanInTheFile) {
  TempDir dir;
  const std::string st = Fixture(dir, "tiny", "safetensors", "tiny");
  ASSERT_TRUE(OpenCheckpoint(st).ok());
  EditConfig(st, [](json& j) { j["num_hidden_layers"] = 1; });
  ExpectRefused(st, {"model.layers.1.", "num_hidden_layers = 1", "disagree"});

  // Kimi-K2.5: the count inside text_config.
  const std::string k25 = Fixture(dir, "kimi-k25-tiny", "safetensors", "k25");
  ASSERT_TRUE(OpenCheckpoint(k25).ok());
  EditConfig(k25, [](json& j) {
    const int n = j["text_config"]["num_hidden_layers"].get<int>();
    j["text_config"]["num_hidden_layers"] = n - 1;
  });
  ExpectRefused(k25, {"num_hidden_layers", "disagree"});
}

// Offset of the u32 value of GGUF key `key` (type id 4 follows the name).
size_t U32ValueOffset(const std::string& img, const std::string& key) {
  const size_t at = img.find(key);
  if (at == std::string::npos) return 0;
  uint32_t type = 0;
  std::memcpy(&type, img.data() + at + key.size(), 4);
  return type == 4 ? at + key.size() + 4 : 0;
}

TEST(InconsistentModelTest, GgufBlockCountSmallerThanTheBlocksWritten) {
  TempDir dir;
  const std::string gguf = Fixture(dir, "tiny", "gguf", "tiny.gguf");
  std::string img = Slurp(gguf);
  const size_t off = U32ValueOffset(img, "llama.block_count");
  ASSERT_NE(off, 0u);
  uint32_t n = 0;
  std::memcpy(&n, img.data() + off, 4);
  ASSERT_EQ(n, 2u);
  n = 1;
  std::memcpy(img.data() + off, &n, 4);
  Spit(gguf, img);
  ExpectRefused(gguf, {"block_count = 1", "layers 1..1"});
}

TEST(InconsistentModelTest, GgufTensorCountOneLessThanTheInfosWritten) {
  TempDir dir;
  const std::string gguf = Fixture(dir, "tiny", "gguf", "tiny.gguf");
  ASSERT_TRUE(OpenCheckpoint(gguf).ok());
  std::string img = Slurp(gguf);
  uint64_t n = 0;  // after "GGUF" and the u32 version
  std::memcpy(&n, img.data() + 8, 8);
  --n;
  std::memcpy(img.data() + 8, &n, 8);
  Spit(gguf, img);
  ExpectRefused(gguf, {"tensor_count (" + std::to_string(n) + ")"});
}

TEST(InconsistentModelTest, TwoNamesOverTheSameBytes) {
  TempDir dir;
  const std::string st = Fixture(dir, "tiny", "safetensors", "tiny");
  // gate_proj and up_proj have one shape: point up_proj at gate_proj's bytes.
  std::string img = Slurp(st + "/model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, img.data(), 8);
  json h = json::parse(img.substr(8, header_len));
  h["model.layers.0.mlp.up_proj.weight"]["data_offsets"] =
      h["model.layers.0.mlp.gate_proj.weight"]["data_offsets"];
  std::string header = h.dump();
  ASSERT_LE(header.size(), header_len);
  header.append(header_len - header.size(), ' ');
  Spit(st + "/model.safetensors", img.substr(0, 8) + header + img.substr(8 + header_len));
  ExpectRefused(st, {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                     "share the same bytes"});
}

class CompressedTensorsConfigContradictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bf16 = Fixture(dir_, "kimi-k2-tiny", "safetensors", "bf16");
    int n = 0;
    ASSERT_TRUE(WriteCompressedTensorsModel(bf16, int4_, CompressedTensorsOptions{}, &n).ok());
    ASSERT_GT(n, 0);
    ASSERT_TRUE(OpenCheckpoint(int4_).ok());
    config_ = Slurp(int4_ + "/config.json");
  }
  template <typename Edit>
  void Refused(Edit edit, const std::vector<std::string>& parts) {
    Spit(int4_ + "/config.json", config_);
    EditConfig(int4_, [&](json& j) { edit(j["quantization_config"]); });
    ExpectRefused(int4_, parts);
  }
  TempDir dir_;
  const std::string int4_ = dir_ / "int4";
  std::string config_;
};

TEST_F(CompressedTensorsConfigContradictionTest, EachFieldIsNamed) {
  Refused([](json& q) { q["quantization_status"] = "frozen"; },
          {"quantization_config.quantization_status", "\"frozen\"", "compressed"});
  Refused([](json& q) { q["ignore"] = "lm_head"; },
          {"quantization_config.ignore", "\"lm_head\"", "list"});
  Refused([](json& q) { q["ignore"].push_back("re:(unclosed"); },
          {"quantization_config.ignore", "re:(unclosed", "not a valid regular expression"});
  Refused([](json& q) { q["config_groups"]["group_0"]["targets"] = {"re:.*nothing_has_this$"}; },
          {"quantization_config.config_groups.group_0.targets", "nothing_has_this",
           "match no INT4 tensor"});
  Refused([](json& q) { q["ignore"].push_back("re:.*experts.*"); },
          {"quantization_config.ignore", "re:.*experts.*", "stored as INT4"});
}

TEST(InconsistentModelTest, KimiK25TopLevelKeysContradictingTextConfig) {
  TempDir dir;
  const std::string k25 = Fixture(dir, "kimi-k25-tiny", "safetensors", "k25");
  EditConfig(k25, [](json& j) {
    j["hidden_size"] = j["text_config"]["hidden_size"].get<int>() * 2;
  });
  ExpectRefused(k25, {"'hidden_size'", "contradicts 'text_config.hidden_size'"});
  // The same value at both levels is fine.
  EditConfig(k25, [](json& j) { j["hidden_size"] = j["text_config"]["hidden_size"]; });
  EXPECT_TRUE(OpenCheckpoint(k25).ok());
}

}  // namespace
}  // namespace specd
