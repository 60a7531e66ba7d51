#include "diagnose/line_prefix.h"

#include <gtest/gtest.h>

namespace specd::diagnose {
namespace {

LinePrefix Parse(std::string_view line) {
  LinePrefix p;
  ParseLinePrefix(line, &p);
  return p;
}

TEST(LinePrefixTest, ConsoleExportStampWithZoneWord) {
  LinePrefix p = Parse("2026-12-02 10:40:27.101 UTC  [2026-12-02 10:40:27 TP1] Load weight end.");
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.label, "TP1");
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.content, "Load weight end.");
  p = Parse("2026-12-02 10:40:27.101 UTC  INFO 12-02 10:40:30 [loggers.py:118] Errored: 0");
  EXPECT_EQ(p.level, Level::kInfo);
  EXPECT_EQ(p.content, "Errored: 0");
  // The column gap is two spaces: indentation after it survives.
  p = Parse("2026-12-02 10:40:27.101 UTC    File \"x.py\", line 1, in f");
  EXPECT_EQ(p.content, "  File \"x.py\", line 1, in f");
}

TEST(LinePrefixTest, CsvExportFields) {
  LinePrefix p = Parse("2026-12-02 10:40:47.001,\"[rank0]:   File \"\"/srv/tp.py\"\", line 90, in f\"");
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.label, "rank0");
  EXPECT_EQ(p.content, "  File \"/srv/tp.py\", line 90, in f");
  p = Parse("2026-12-02 10:40:50.000,Killed");
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.content, "Killed");
  // Python logging's comma before the milliseconds is not a CSV field.
  p = Parse("2026-12-02 10:40:27,123 ERROR boom");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_EQ(p.content, "boom");
}

TEST(LinePrefixTest, ProcessLabels) {
  LinePrefix p = Parse("[TP3] KeyError: 12");
  EXPECT_EQ(p.label, "TP3");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.content, "KeyError: 12");

  p = Parse("[rank2]:   File \"x.py\", line 1, in f");
  EXPECT_EQ(p.label, "rank2");
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.content, "  File \"x.py\", line 1, in f");  // indentation survives

  p = Parse("(RayWorkerWrapper pid=8812, ip=10.0.0.2) ERROR 12-02 10:40:27 [worker_base.py:620]     return f()");
  EXPECT_EQ(p.label, "RayWorkerWrapper pid=8812");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.content, "    return f()");

  p = Parse("(VllmWorker rank=2 pid=9) x");
  EXPECT_EQ(p.rank, 2);

  p = Parse("vllm-1  | [2026-12-02 10:40:27 DP0 TP5] Scheduler hit an exception: Traceback (most recent call last):");
  EXPECT_EQ(p.label, "vllm-1/DP0 TP5");
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.content, "Scheduler hit an exception: Traceback (most recent call last):");

  p = Parse("[1,3]<stderr>:RuntimeError: boom");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.content, "RuntimeError: boom");

  p = Parse("[default5]:KeyError: 1");
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.content, "KeyError: 1");
}

TEST(LinePrefixTest, StampsAndLevels) {
  LinePrefix p = Parse("2026-12-02T10:40:27.123456789Z stderr F Traceback (most recent call last):");
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.content, "Traceback (most recent call last):");

  p = Parse("INFO 12-02 10:40:28 engine.py:12] started");
  EXPECT_EQ(p.level, Level::kInfo);
  EXPECT_EQ(p.content, "started");

  p = Parse("[rank0]:[W1202 10:40:29.456 ProcessGroupNCCL.cpp:1479] Warning: x");
  EXPECT_EQ(p.level, Level::kWarn);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.content, "Warning: x");

  p = Parse("E1202 10:40:30.001000 140 torch/distributed/run.py:874] failed (exitcode: 1)");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_EQ(p.content, "failed (exitcode: 1)");

  p = Parse("Dec  2 10:40:27 node7 kernel: Out of memory: Killed process 2345 (python3)");
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.label, "");
  EXPECT_EQ(p.content, "Out of memory: Killed process 2345 (python3)");

  p = Parse("Dec 12 10:40:27 node7 python3[2344]: hello");
  EXPECT_EQ(p.label, "python3[2344]");
  EXPECT_EQ(p.content, "hello");

  p = Parse("ERROR:    Exception in ASGI application");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_EQ(p.content, "Exception in ASGI application");

  // Not prefixes: content that merely looks bracketed or capitalised.
  p = Parse("[load weights] not a label");
  EXPECT_EQ(p.label, "");
  EXPECT_EQ(p.content, "[load weights] not a label");
  p = Parse("KeyError: 12");
  EXPECT_EQ(p.content, "KeyError: 12");
  EXPECT_EQ(p.level, Level::kNone);
}

TEST(LinePrefixTest, SpecdTextLines) {
  LinePrefix p = Parse("2026-12-02T10:40:27.123Z ERROR rank=1 [load weights] NotFound: x (hint: y)");
  EXPECT_TRUE(p.specd);
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.label, "rank1");
  EXPECT_EQ(p.stage, "load weights");
  EXPECT_EQ(p.content, "NotFound: x (hint: y)");

  p = Parse("2026-12-02T10:40:27.123Z INFO  [platform] using AVX2");
  EXPECT_TRUE(p.specd);
  EXPECT_EQ(p.level, Level::kInfo);
  EXPECT_EQ(p.stage, "platform");
  EXPECT_EQ(p.content, "using AVX2");
}

TEST(LinePrefixTest, TimestampsCompareAcrossFormats) {
  double iso, bracket;
  ASSERT_GT(ParseIsoTimestamp("2026-12-02T10:40:27.500Z", &iso), 0u);
  ASSERT_GT(ParseIsoTimestamp("2026-12-02 10:40:28,000", &bracket), 0u);
  EXPECT_DOUBLE_EQ(bracket - iso, 0.5);
  double offset;
  ASSERT_GT(ParseIsoTimestamp("2026-12-02T12:40:27.500+02:00", &offset), 0u);
  EXPECT_DOUBLE_EQ(offset, iso);
  // vLLM stamps carry no year; they compare with ISO stamps of the same day.
  LinePrefix p = Parse("ERROR 12-02 10:40:29 [x.py:1] y");
  EXPECT_DOUBLE_EQ(p.ts - iso, 1.5);
  EXPECT_EQ(ParseIsoTimestamp("2026-13-02T10:40:27Z", &iso), 0u);
  EXPECT_EQ(ParseIsoTimestamp("12:00", &iso), 0u);
}

TEST(LinePrefixTest, ConsoleSeverityBeforeEachLineStamp) {
  LinePrefix p = Parse("ERROR 2025-04-07T11:13:29.912Z   File \"/app/x.py\", line 3, in f");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.content, "  File \"/app/x.py\", line 3, in f");
  p = Parse(
      "DEFAULT 2025-04-07T11:13:25.033Z [2025-04-07 11:13:25 TP0] Scheduler hit an exception:");
  EXPECT_EQ(p.level, Level::kNone);
  EXPECT_TRUE(p.has_ts);
  EXPECT_EQ(p.label, "TP0");
  EXPECT_EQ(p.content, "Scheduler hit an exception:");
  p = Parse("DEFAULT settings loaded");  // a word, not a severity column
  EXPECT_FALSE(p.has_ts);
  EXPECT_EQ(p.content, "DEFAULT settings loaded");
}

TEST(LinePrefixTest, CollectorStampWinsOverTheProcessStamp) {
  // containerd writes the node's zone; vLLM and SGLang write naive local time.
  double utc;
  ASSERT_GT(ParseIsoTimestamp("2025-04-07T11:13:40.500Z", &utc), 0u);
  LinePrefix p = Parse(
      "2025-04-07T19:13:40.500+08:00 stderr F ERROR 04-07 19:13:40 [core.py:387] RuntimeError: x");
  EXPECT_EQ(p.level, Level::kError);
  EXPECT_DOUBLE_EQ(p.ts, utc);
  p = Parse("2025-04-07T19:13:40.500+08:00 stdout F [2025-04-07 19:13:40 TP2] Decode batch.");
  EXPECT_EQ(p.label, "TP2");
  EXPECT_DOUBLE_EQ(p.ts, utc);
  p = Parse("2025-04-07 11:13:40.500,\"[2025-04-07 19:13:40 TP2] Decode batch.\"");
  EXPECT_DOUBLE_EQ(p.ts, utc);
}

}  // namespace
}  // namespace specd::diagnose
