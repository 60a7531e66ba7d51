#include "diagnose/record_order.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace specd::diagnose {
namespace {

// Feeds `file` last line first, as a backward reader does, and returns what
// the reverser yields as "line_no:text".
std::vector<std::string> Reorder(const std::vector<std::string>& file) {
  size_t next = file.size();
  RecordReverser r([&](std::string_view* l, uint64_t* no) {
    if (next == 0) return false;
    --next;
    *l = file[next];
    *no = next + 1;
    return true;
  });
  std::vector<std::string> out;
  std::string_view l;
  uint64_t no;
  while (r.Next(&l, &no)) out.push_back(std::to_string(no) + ":" + std::string(l));
  return out;
}

TEST(RecordOrderTest, RecordsComeLastFirstWithTheirLinesInOrder) {
  const std::vector<std::string> file = {
      "Killed",  // bare line above every record
      "2026-12-02T10:40:30.000Z ERROR worker died",
      "2026-12-02T10:40:27.000Z ERROR Scheduler hit an exception: Traceback (most recent call last):",
      "  File \"a.py\", line 1, in f",
      "    g()",
      "KeyError: 12",
      "2026-12-02T10:40:20.000Z INFO started",
  };
  EXPECT_EQ(Reorder(file), (std::vector<std::string>{
                               "7:2026-12-02T10:40:20.000Z INFO started",
                               "3:2026-12-02T10:40:27.000Z ERROR Scheduler hit an exception: "
                               "Traceback (most recent call last):",
                               "4:  File \"a.py\", line 1, in f",
                               "5:    g()",
                               "6:KeyError: 12",
                               "2:2026-12-02T10:40:30.000Z ERROR worker died",
                               "1:Killed",
                           }));
}

TEST(RecordOrderTest, OneLineRecordsAreSimplyReversed) {
  const std::vector<std::string> file = {
      "[rank1]: KeyError: 12",
      "[rank1]:     return T[cc]",
      "[rank1]:   File \"t.py\", line 3, in lookup",
      "[rank1]: Traceback (most recent call last):",
  };
  EXPECT_EQ(Reorder(file), (std::vector<std::string>{
                               "4:[rank1]: Traceback (most recent call last):",
                               "3:[rank1]:   File \"t.py\", line 3, in lookup",
                               "2:[rank1]:     return T[cc]",
                               "1:[rank1]: KeyError: 12",
                           }));
}

TEST(RecordOrderTest, LongRunsOfBareLinesAreBoundedAndKeepEveryLine) {
  std::vector<std::string> file = {"2026-12-02T10:40:20.000Z INFO head"};
  const size_t n = 3 * RecordReverser::kMaxRecordLines + 7;
  for (size_t i = 0; i < n; ++i) file.push_back("bare " + std::to_string(i));
  const std::vector<std::string> out = Reorder(file);
  ASSERT_EQ(out.size(), file.size());
  std::vector<bool> seen(file.size() + 1, false);
  for (const std::string& s : out) {
    const size_t no = std::stoul(s.substr(0, s.find(':')));
    ASSERT_LE(no, file.size());
    EXPECT_FALSE(seen[no]) << s;
    seen[no] = true;
    EXPECT_EQ(s.substr(s.find(':') + 1), file[no - 1]);
  }
  // The head still comes right before the bare lines it kept (the newest
  // kMaxRecordLines at most), in file order.
  size_t head = 0;
  while (head < out.size() && out[head] != "1:" + file[0]) ++head;
  ASSERT_LT(head + 1, out.size());
  EXPECT_EQ(out[head + 1], "2:bare 0");
}

std::vector<std::string> ByStamps(const std::vector<std::string>& file, bool ties_in_file_order) {
  size_t next = file.size();
  StampOrderer r(
      [&](std::string_view* l, uint64_t* no) {
        if (next == 0) return false;
        --next;
        *l = file[next];
        *no = next + 1;
        return true;
      },
      ties_in_file_order);
  std::vector<std::string> out;
  std::string_view l;
  uint64_t no;
  while (r.Next(&l, &no)) out.push_back(std::to_string(no) + ":" + std::string(l));
  return out;
}

// A console sorted by the printed millisecond: the lines of one millisecond
// are oldest first, the milliseconds newest first.
TEST(StampOrderTest, TiesKeepTheFileOrderWhenTheExportDid) {
  const std::vector<std::string> file = {
      "ERROR 2025-04-07T11:13:29.913Z     g()",
      "ERROR 2025-04-07T11:13:29.913Z KeyError: 12",
      "ERROR 2025-04-07T11:13:29.912Z Traceback (most recent call last):",
      "ERROR 2025-04-07T11:13:29.912Z   File \"a.py\", line 1, in f",
      "INFO 2025-04-07T11:13:20.000Z started",
  };
  EXPECT_EQ(ByStamps(file, /*ties_in_file_order=*/true),
            (std::vector<std::string>{
                "5:INFO 2025-04-07T11:13:20.000Z started",
                "3:ERROR 2025-04-07T11:13:29.912Z Traceback (most recent call last):",
                "4:ERROR 2025-04-07T11:13:29.912Z   File \"a.py\", line 1, in f",
                "1:ERROR 2025-04-07T11:13:29.913Z     g()",
                "2:ERROR 2025-04-07T11:13:29.913Z KeyError: 12",
            }));
}

TEST(StampOrderTest, TiesAreReversedWhenTheExportWasNewestFirstThroughout) {
  const std::vector<std::string> file = {
      "ERROR 2025-04-07T11:13:29.912Z KeyError: 12",
      "ERROR 2025-04-07T11:13:29.912Z   File \"a.py\", line 1, in f",
      "ERROR 2025-04-07T11:13:29.912Z Traceback (most recent call last):",
      "INFO 2025-04-07T11:13:20.000Z started",
  };
  EXPECT_EQ(ByStamps(file, /*ties_in_file_order=*/false),
            (std::vector<std::string>{
                "4:INFO 2025-04-07T11:13:20.000Z started",
                "3:ERROR 2025-04-07T11:13:29.912Z Traceback (most recent call last):",
                "2:ERROR 2025-04-07T11:13:29.912Z   File \"a.py\", line 1, in f",
                "1:ERROR 2025-04-07T11:13:29.912Z KeyError: 12",
            }));
}

// Merged streams are only roughly newest first; bare lines stay with their
// record, and bare lines above every record go right after the record below
// them in the file, whose time is the best guess of theirs.
TEST(StampOrderTest, SortsRoughOrderAndKeepsRecordsTogether) {
  const std::vector<std::string> file = {
      "Killed",
      "2025-04-07T11:13:31.000Z [rank0]: b",
      "2025-04-07T11:13:32.000Z [rank1]: c",
      "2025-04-07T11:13:30.000Z [rank1]: a",
      "  continuation of a",
  };
  EXPECT_EQ(ByStamps(file, true), (std::vector<std::string>{
                                      "4:2025-04-07T11:13:30.000Z [rank1]: a",
                                      "5:  continuation of a",
                                      "2:2025-04-07T11:13:31.000Z [rank0]: b",
                                      "1:Killed",
                                      "3:2025-04-07T11:13:32.000Z [rank1]: c",
                                  }));
}

TEST(StampOrderTest, LongInputsPassEveryLineOnceInStampOrder) {
  std::vector<std::string> file;
  const size_t n = 3 * StampOrderer::kWindowLines + 11;
  for (size_t i = 0; i < n; ++i) {
    const size_t t = n - 1 - i;  // newest first
    char stamp[64];
    std::snprintf(stamp, sizeof(stamp), "2025-04-07T%02zu:%02zu:%02zu.000Z line %zu", t / 3600 % 24,
                  t / 60 % 60, t % 60, t);
    file.push_back(stamp);
  }
  const std::vector<std::string> out = ByStamps(file, true);
  ASSERT_EQ(out.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], std::to_string(n - i) + ":" + file[n - 1 - i]);
}

}  // namespace
}  // namespace specd::diagnose
