#include "modelgen/plant_value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "loader/safetensors_reader.h"
#include "loader/test_util.h"
#include "modelgen/fixture.h"
#include "tensor/dtype.h"

namespace specd {
namespace {

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(PlantValueTest, ChangesExactlyOneElementInEachFloatDtype) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    testing_util::TempDir dir;
    FixtureOptions o;
    o.out = dir.path() + "/tiny";
    o.dtype = dt;
    o.seed = 3;
    ASSERT_TRUE(MakeFixture(o).ok());
    const std::string file = o.out + "/model.safetensors";
    const std::vector<uint8_t> before = ReadAll(file);
    const std::string name = "model.layers.0.self_attn.q_proj.weight";
    ASSERT_TRUE(PlantValue(o.out, name, 5, std::numeric_limits<float>::quiet_NaN()).ok());
    const std::vector<uint8_t> after = ReadAll(file);
    ASSERT_EQ(before.size(), after.size());
    auto views = ParseSafetensors(after.data(), after.size(), file);
    ASSERT_TRUE(views.ok()) << views.status().ToString();
    const TensorView* q = nullptr;
    for (const TensorView& v : *views)
      if (v.name == name) q = &v;
    ASSERT_NE(q, nullptr);
    const size_t es = DTypeBlockBytes(dt);
    const size_t at = static_cast<const uint8_t*>(q->data) - after.data() + 5 * es;
    float got;
    if (dt == DType::kF32) {
      std::memcpy(&got, &after[at], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &after[at], 2);
      got = dt == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
    }
    EXPECT_TRUE(std::isnan(got));
    size_t differ = 0;
    for (size_t i = 0; i < after.size(); ++i) differ += before[i] != after[i] && (i < at || i >= at + es);
    EXPECT_EQ(differ, 0u);
  }
}

TEST(PlantValueTest, NamesWhatIsMissing) {
  testing_util::TempDir dir;
  FixtureOptions o;
  o.out = dir.path() + "/tiny";
  ASSERT_TRUE(MakeFixture(o).ok());
  Status s = PlantValue(o.out, "no.such.weight", 0, 1.f);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no.such.weight"), std::string::npos);
  s = PlantValue(o.out, "model.norm.weight", 1 << 30, 1.f);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace specd
