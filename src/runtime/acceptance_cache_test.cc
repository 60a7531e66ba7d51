#include "runtime/acceptance_cache.h"

#include <gtest/gtest.h>

#include <fstream>

#include "loader/test_util.h"

namespace specd {
namespace {

AcceptanceModel Learned() {
  AcceptanceModel m(4);
  for (int i = 0; i < 30; ++i) m.Observe(2, i % 5 == 0 ? 0 : (i % 3 == 0 ? 1 : 2));
  return m;
}

TEST(AcceptanceCacheTest, RemembersUnderItsKeyOnly) {
  testing_util::TempDir dir;
  const AcceptanceModel m = Learned();
  EXPECT_FALSE(LoadAcceptance(dir.path(), "target a | head b", 4).has_value());
  SaveAcceptance(dir.path(), "target a | head b", m);
  const std::optional<AcceptanceModel> back = LoadAcceptance(dir.path(), "target a | head b", 4);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->observations(), m.observations());
  for (int k = 0; k <= 4; ++k) EXPECT_NEAR(back->ExpectedTokens(k), m.ExpectedTokens(k), 1e-12);
  EXPECT_FALSE(LoadAcceptance(dir.path(), "target a | head c", 4).has_value());
  // The same file name with another key inside (a hash collision) is not ours.
  {
    std::ifstream in(AcceptanceCachePath(dir.path(), "target a | head b"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string other = AcceptanceCachePath(dir.path(), "other");
    std::ofstream(other) << text;
    EXPECT_FALSE(LoadAcceptance(dir.path(), "other", 4).has_value());
  }
}

TEST(AcceptanceCacheTest, NothingLearnedIsNotWritten) {
  testing_util::TempDir dir;
  SaveAcceptance(dir.path(), "k", AcceptanceModel(4));
  EXPECT_FALSE(std::filesystem::exists(AcceptanceCachePath(dir.path(), "k")));
}

// A cache folder that cannot be made (a file is in the way) costs the
// memory, never the run.
TEST(AcceptanceCacheTest, AnUnwritableCacheIsLoggedNotFatal) {
  testing_util::TempDir dir;
  std::ofstream(dir / "file") << "x";
  const std::string cache = dir / "file/specd";
  SaveAcceptance(cache, "k", Learned());
  EXPECT_FALSE(LoadAcceptance(cache, "k", 4).has_value());
  EXPECT_FALSE(std::filesystem::exists(AcceptanceCachePath(cache, "k")));
}

TEST(AcceptanceCacheTest, ACorruptFileIsIgnored) {
  testing_util::TempDir dir;
  const std::string key = "k";
  const std::string path = AcceptanceCachePath(dir.path(), key);
  const std::string head = R"({"format":"specd acceptance v1","key":"k",)";
  for (const std::string& text :
       {std::string("{\"format\": \"specd acc"),  // torn
        std::string("[1, 2, 3]"),
        head + R"("observations":3,"tried":[2,1],"accepted":[3,1]})",  // accepted > tried
        head + R"("observations":3,"tried":[2,"x"],"accepted":[1,1]})",
        head + R"("observations":-4,"tried":[2,1],"accepted":[1,1]})",
        head + R"("tried":[2,1],"accepted":[1,1]})"}) {
    std::ofstream(path) << text;
    EXPECT_FALSE(LoadAcceptance(dir.path(), key, 4).has_value()) << text;
  }
  std::ofstream(path) << head + R"("observations":3,"tried":[2,1],"accepted":[1,0.5]})";
  const std::optional<AcceptanceModel> ok = LoadAcceptance(dir.path(), key, 4);
  ASSERT_TRUE(ok.has_value());
  EXPECT_NEAR(ok->p(1), (1 + 2 * 0.5) / (2 + 2.0), 1e-12);
}

}  // namespace
}  // namespace specd
