#include "runtime/scheduler_stop.h"

#include <gtest/gtest.h>

#include <random>

namespace specd {
namespace {

// Reference: the whole text at once; the first end position at which some
// stop string is complete cuts the text at that stop's start (the longest
// one when several end there).
std::string Reference(const std::string& text, const std::vector<std::string>& stops,
                      bool* stopped) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t start = std::string::npos;
    for (const std::string& s : stops)
      if (s.size() <= end && text.substr(end - s.size(), s.size()) == s)
        start = std::min(start, end - s.size());
    if (start != std::string::npos) {
      *stopped = true;
      return text.substr(0, start);
    }
  }
  *stopped = false;
  return text;
}

TEST(StopStringMatcherTest, RandomSplitsMatchWholeTextReference) {
  std::mt19937 rng(5);
  const std::string alphabet = "ab c\xc3\xa9";  // includes a 2-byte character
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      const size_t k = rng() % 5;
      text += k == 4 ? alphabet.substr(4, 2) : alphabet.substr(k, 1);
    }
    std::vector<std::string> stops;
    const int n_stops = static_cast<int>(rng() % 3);
    for (int s = 0; s < n_stops; ++s) {
      const size_t a = rng() % (text.size() + 1), b = std::min(text.size(), a + 1 + rng() % 4);
      std::string stop = rng() % 3 ? text.substr(a, b - a) : std::string("zz");
      // Stops are valid UTF-8: skip cuts inside the 2-byte character.
      if (stop.empty() || (stop[0] & 0xC0) == 0x80 || (stop.back() & 0xE0) == 0xC0) continue;
      stops.push_back(stop);
    }
    StopStringMatcher m(stops);
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = 1 + rng() % 4;
      // Pieces end on character boundaries, as the stream decoder delivers.
      while (pos + n < text.size() && (text[pos + n] & 0xC0) == 0x80) ++n;
      out += m.Push(std::string_view(text).substr(pos, n));
      pos += n;
    }
    out += m.Flush();
    bool stopped = false;
    const std::string want = Reference(text, stops, &stopped);
    ASSERT_EQ(out, want) << "text '" << text << "' iteration " << iter;
    ASSERT_EQ(m.stopped(), stopped);
  }
}

TEST(StopStringMatcherTest, HoldsBackOnlyPossibleStopPrefixes) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.Push("hello E"), "hello ");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("x"), "ENx");
  EXPECT_EQ(m.Push(" E"), " ");
  EXPECT_EQ(m.Push("ND tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, FirstCompletedStopWinsWhateverThePieces) {
  for (const char* pieces : {"bbac", "b|bac", "bb|ac", "bba|c"}) {
    StopStringMatcher m({"bbacz", "ba"});
    std::string out, p = pieces;
    size_t pos = 0;
    for (size_t bar; (bar = p.find('|', pos)) != std::string::npos; pos = bar + 1)
      out += m.Push(p.substr(pos, bar - pos));
    out += m.Push(p.substr(pos));
    out += m.Flush();
    EXPECT_EQ(out, "b") << pieces;
    EXPECT_TRUE(m.stopped());
  }
}

TEST(StopStringMatcherTest, NoStopsPassesThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.stopped());
}

}  // namespace
}  // namespace specd
