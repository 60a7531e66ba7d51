#include "diagnose/line_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace specd::diagnose {
namespace {

struct Line {
  std::string text;
  uint64_t no;
  bool operator==(const Line& o) const { return text == o.text && no == o.no; }
};

// A temporary file holding `data`, removed on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& data) {
    f_ = std::tmpfile();
    std::fwrite(data.data(), 1, data.size(), f_);
    std::fflush(f_);
  }
  ~TempFile() { std::fclose(f_); }
  int fd() const {
    ::lseek(fileno(f_), 0, SEEK_SET);
    return fileno(f_);
  }

 private:
  std::FILE* f_;
};

std::vector<Line> ReadAll(LineReader* r) {
  std::vector<Line> out;
  std::string_view l;
  uint64_t no;
  while (r->Next(&l, &no)) out.push_back({std::string(l), no});
  EXPECT_TRUE(r->status().ok());
  return out;
}

// Reference: split on '\n', drop '\r', cap, skip binary; numbered from 1.
std::vector<Line> Naive(const std::string& data, size_t cap) {
  std::vector<Line> out;
  uint64_t no = 0;
  size_t start = 0;
  while (start < data.size()) {
    size_t nl = data.find('\n', start);
    size_t end = nl == std::string::npos ? data.size() : nl;
    std::string l = data.substr(start, end - start);
    ++no;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.size() > cap) l.resize(cap);
    if (!IsBinaryLine(l)) out.push_back({l, no});
    start = end + 1;
  }
  return out;
}

std::string RandomLog(uint32_t seed, size_t n_lines) {
  std::mt19937 rng(seed);
  std::string s;
  for (size_t i = 0; i < n_lines; ++i) {
    size_t len = rng() % 7 == 0 ? rng() % 5000 : rng() % 120;  // some over the cap
    for (size_t k = 0; k < len; ++k) s += static_cast<char>('a' + rng() % 26);
    if (rng() % 11 == 0) s += '\r';
    s += '\n';
  }
  return s;
}

TEST(LineReaderTest, ForwardMatchesNaiveSplit) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::string data = RandomLog(seed, 3000);
    if (seed == 2) data.pop_back();  // no trailing newline
    TempFile f(data);
    auto r = NewForwardLineReader(f.fd(), "t", 1000);
    EXPECT_EQ(ReadAll(r.get()), Naive(data, 1000)) << "seed " << seed;
    EXPECT_EQ(r->stats().bytes, data.size());
  }
}

TEST(LineReaderTest, BackwardIsForwardReversed) {
  for (uint32_t seed : {4u, 5u}) {
    std::string data = RandomLog(seed, 4000);
    if (seed == 5) data.pop_back();
    TempFile f(data);
    auto fwd = NewForwardLineReader(f.fd(), "t", 1000);
    std::vector<Line> want = ReadAll(fwd.get());
    auto back = NewBackwardLineReader(f.fd(), "t", fwd->stats().lines, 1000);
    std::vector<Line> got = ReadAll(back.get());
    std::reverse(got.begin(), got.end());
    EXPECT_EQ(got, want) << "seed " << seed;
  }
}

TEST(LineReaderTest, HugeLineIsCappedNotBuffered) {
  std::string data = "head\n" + std::string(5 << 20, 'x') + "\ntail\n";
  TempFile f(data);
  auto r = NewForwardLineReader(f.fd(), "t", 4096);
  std::vector<Line> lines = ReadAll(r.get());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].text.size(), 4096u);
  EXPECT_EQ(lines[2], (Line{"tail", 3}));
  EXPECT_EQ(r->stats().truncated_lines, 1u);
}

TEST(LineReaderTest, BinaryLinesAreSkipped) {
  std::string data = "ok one\n";
  data += std::string("\x01\x02\x03\x00\xff\xfe garbage", 15) + "\n";
  data += "ok two\n";
  TempFile f(data);
  auto r = NewForwardLineReader(f.fd(), "t", 4096);
  std::vector<Line> lines = ReadAll(r.get());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], (Line{"ok two", 3}));
  EXPECT_EQ(r->stats().binary_lines, 1u);
  EXPECT_FALSE(IsBinaryLine("\tindented\twith tabs"));
  EXPECT_FALSE(IsBinaryLine("\x1b[31mcolored\x1b[0m"));
}

TEST(LineReaderTest, SpoolKeepsStdinForASecondPass) {
  std::string data = RandomLog(7, 500);
  TempFile f(data);
  std::FILE* spool = std::tmpfile();
  auto r = NewForwardLineReader(f.fd(), "t", 1000, spool, 1 << 30);
  std::vector<Line> want = ReadAll(r.get());
  ASSERT_TRUE(SpoolComplete(*r));
  std::fflush(spool);
  auto back = NewBackwardLineReader(fileno(spool), "t", r->stats().lines, 1000);
  std::vector<Line> got = ReadAll(back.get());
  std::reverse(got.begin(), got.end());
  EXPECT_EQ(got, want);
  std::fclose(spool);

  std::FILE* small = std::tmpfile();
  auto r2 = NewForwardLineReader(f.fd(), "t", 1000, small, 100);
  ReadAll(r2.get());
  EXPECT_FALSE(SpoolComplete(*r2));
  std::fclose(small);
}

}  // namespace
}  // namespace specd::diagnose
