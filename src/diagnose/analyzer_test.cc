// Behaviour of the analyzer on small hand-made logs (the corpus test covers
// whole realistic logs).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "diagnose/analyzer.h"
#include "diagnose/diagnose.h"

namespace specd::diagnose {
namespace {

std::string Traceback(const std::string& prefix, const std::string& exc,
                      const std::string& file = "/app/x.py", const std::string& func = "f") {
  return prefix + "Traceback (most recent call last):\n" + prefix + "  File \"" + file +
         "\", line 7, in " + func + "\n" + prefix + "    do_it()\n" + prefix + exc + "\n";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += l + "\n";
  return s;
}

TEST(AnalyzerTest, EarliestTimestampWinsOverOrderOfAppearance) {
  std::string log = "[TP1] 2026-12-02 10:40:30,000 ERROR x\n" +
                    Traceback("[TP1] ", "ValueError: late") +
                    "[TP0] 2026-12-02 10:40:27,000 ERROR y\n" +
                    Traceback("[TP0] ", "ValueError: early");
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.process, "TP0");
  EXPECT_EQ(d.cause.message, "early");
}

// The supervisor's block is the only record of a rank that died without a
// word: its root cause is used, its other lines are not failures of their own.
TEST(AnalyzerTest, SupervisorBlockNamesASilentlyKilledRank) {
  std::string log =
      "2026-12-02T15:27:20.912Z ERROR rank=0 [allreduce #200] Unavailable: rank 1 (pid 7) died "
      "during allreduce #200 (epoch 200)\n"
      "==== specd: a rank failed; root cause first ====\n"
      "root cause: rank 1 [worker loop] failed first\n"
      "  error:     killed by signal 9 (SIGKILL)\n"
      "  exit:      signal 9 (SIGKILL)\n"
      "  last log lines of rank 1:\n"
      "    2026-12-02T15:27:20.001Z ERROR rank=1 [x] Internal: quoted, not a new failure\n"
      "consequences (not causes):\n"
      "  rank(s) 0 [allreduce #200]: Unavailable: rank 1 (pid 7) died (peer process died)\n";
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.rank, 1);
  EXPECT_EQ(d.cause.stage, "worker loop");
  EXPECT_EQ(d.cause.message, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(d.signature, "killed");  // no OOM evidence in this log
  EXPECT_TRUE(d.other_failures.empty());
}

// A program's unterminated stdout glued to the next log line does not hide it.
TEST(AnalyzerTest, LogLineGluedToUnterminatedOutputIsStillALogLine) {
  std::string log =
      "generated text without a newline2026-12-02T15:27:20.912Z ERROR rank=2 [load weights] "
      "NotFound: /m/model.safetensors: tensor 'w' not found\n";
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.rank, 2);
  EXPECT_EQ(d.cause.type, "NotFound");
  EXPECT_EQ(d.cause.stage, "load weights");
}

TEST(AnalyzerTest, WithoutTimestampsFirstAppearanceWins) {
  std::string log = Traceback("[TP1] ", "ValueError: first") + Traceback("[TP0] ", "ValueError: second");
  Diagnosis d = DiagnoseText(log);
  EXPECT_EQ(d.cause.process, "TP1");
}

TEST(AnalyzerTest, InterleavedTracebacksAreDemultiplexed) {
  std::vector<std::string> a = Lines(Traceback("[rank0]: ", "KeyError: 'a'", "/app/a.py", "fa"));
  std::vector<std::string> b = Lines(Traceback("[rank1]: ", "KeyError: 'b'", "/app/b.py", "fb"));
  std::vector<std::string> mixed;
  for (size_t i = 0; i < a.size(); ++i) {
    mixed.push_back(b[i]);
    mixed.push_back(a[i]);
  }
  Diagnosis d = DiagnoseText(Join(mixed));
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.process, "rank1");
  EXPECT_EQ(d.cause.message, "'b'");
  EXPECT_EQ(d.cause.frame.function, "fb");
  ASSERT_EQ(d.other_failures.size(), 1u);
  EXPECT_EQ(d.other_failures[0].frame.function, "fa");
}

TEST(AnalyzerTest, ConsequenceBeforeCauseIsNotTheCause) {
  std::string log = Traceback("[rank0]: ", "BrokenPipeError: [Errno 32] Broken pipe") +
                    Traceback("[rank1]: ", "AssertionError: n_heads % tp != 0");
  Diagnosis d = DiagnoseText(log);
  EXPECT_EQ(d.cause.type, "AssertionError");
  EXPECT_EQ(d.consequences_total, 1u);
  EXPECT_EQ(d.consequences[0].process, "rank0");
}

// A kill seen from outside after another process stated its failure is that
// failure's consequence, even when the failure is only an error line.
TEST(AnalyzerTest, KillAfterAnotherFailureIsAConsequence) {
  std::string log =
      "[TP5] 2026-12-02 10:40:27,000 ERROR RuntimeError: CUDA error: uncorrectable ECC error\n"
      "[2026-12-02 10:40:40] Received sigquit from a child process. It usually means the child "
      "failed.\n"
      "Killed\n";
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.process, "TP5");
  EXPECT_FALSE(d.cause_is_consequence);
  EXPECT_EQ(d.consequences_total, 2u);
}

// Neither a progress bar that a collector marked ERROR nor a handled warning
// is a failure that makes a later kill its consequence.
TEST(AnalyzerTest, KillWithNothingFailedBeforeIsTheCause) {
  std::string log =
      "ERROR 2026-12-02T10:40:20.000Z Loading safetensors checkpoint shards: 100% Completed\n"
      "INFO 2026-12-02T10:40:21.000Z loading 4 shards into host memory\n"
      "ERROR 2026-12-02T10:40:30.000Z Killed\n";
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.signature, "killed");
  EXPECT_FALSE(d.cause_is_consequence);
}

// A traceback logged at WARNING after which the process went on was caught
// and retried: it is not a failure, and a later failure is the cause.
TEST(AnalyzerTest, HandledWarningTracebackIsNotTheFailure) {
  const std::string w = "WARNING 12-02 10:40:15 [weight_utils.py:281] ";
  std::string retried = w + "download failed, retrying\n" +
                        Traceback(w, "requests.exceptions.ReadTimeout: Read timed out.") +
                        "INFO 12-02 10:40:47 [weight_utils.py:270] download done\n";
  Diagnosis d = DiagnoseText(retried);
  EXPECT_FALSE(d.found);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("1 traceback(s) logged below ERROR"), std::string::npos);

  d = DiagnoseText(retried + Traceback("ERROR 12-02 10:41:00 [core.py:390] ", "ValueError: late"));
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.message, "late");
  EXPECT_TRUE(d.other_failures.empty());
}

// Python's logging prints the traceback under the message line: the record's
// level and its retry wording decide, not the bare traceback lines.
TEST(AnalyzerTest, TracebackUnderARetryWarningRecordIsHandled) {
  std::string log =
      "2026-12-02 10:40:11,223 WARNING hub.py:112 fetch failed, will retry in 5s (1/3)\n" +
      Traceback("", "requests.exceptions.HTTPError: 504 Server Error") +
      "2026-12-02 10:40:16,330 INFO hub.py:118 fetched on attempt 2\n";
  EXPECT_FALSE(DiagnoseText(log).found);
}

// Without retry wording, a bare traceback under an unrelated warning is an
// uncaught exception; and a handled traceback that ends the log stays a
// failure, since nothing shows the process went on.
TEST(AnalyzerTest, TracebacksNotShownHandledStayFailures) {
  std::string uncaught = "2026-12-02 10:40:11,223 WARNING disk.py:9 cache volume 91% full\n" +
                         Traceback("", "OSError: [Errno 28] No space left on device") +
                         "2026-12-02 10:40:16,330 INFO supervisor.py:40 child exited\n";
  Diagnosis d = DiagnoseText(uncaught);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.type, "OSError");

  const std::string w = "WARNING 12-02 10:40:15 [weight_utils.py:281] ";
  d = DiagnoseText(Traceback(w, "requests.exceptions.ReadTimeout: Read timed out."));
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.type, "requests.exceptions.ReadTimeout");
}

// Every line stamped, milliseconds newest first, lines within one millisecond
// oldest first: read in stamp order, the traceback is whole again.
TEST(AnalyzerTest, NewestFirstLineStampedExportIsReadInStampOrder) {
  std::string log =
      "ERROR 2025-04-07T11:13:30.000Z Killed\n"
      "ERROR 2025-04-07T11:13:29.913Z     raise ValueError(msg)\n"
      "ERROR 2025-04-07T11:13:29.913Z ValueError: max_model_len too large\n"
      "ERROR 2025-04-07T11:13:29.912Z Traceback (most recent call last):\n"
      "ERROR 2025-04-07T11:13:29.912Z   File \"/app/check.py\", line 9, in check_len\n"
      "INFO 2025-04-07T11:13:21.000Z model loaded\n"
      "ERROR 2025-04-07T11:13:05.000Z Loading checkpoint shards: 100% Completed\n"
      "INFO 2025-04-07T11:13:01.000Z server starting\n";
  Diagnosis d = DiagnoseText(log);
  ASSERT_TRUE(d.found);
  EXPECT_TRUE(d.reversed);
  EXPECT_EQ(d.cause.type, "ValueError");
  EXPECT_EQ(d.cause.frame.function, "check_len");
  EXPECT_EQ(d.cause.frame.code, "raise ValueError(msg)");
  // The progress bar the console marked ERROR does not announce the
  // traceback: a lower record comes between them.
  ASSERT_FALSE(d.cause.evidence.empty());
  EXPECT_EQ(d.cause.evidence[0].line, 4u);
}

TEST(AnalyzerTest, LoggingErrorIsNoiseButItsMessageIsAFallback) {
  std::string noise =
      "--- Logging error ---\n" +
      Traceback("", "TypeError: not all arguments converted during string formatting",
                "/usr/lib/python3.12/logging/__init__.py", "getMessage") +
      "Call stack:\n  File \"/app/serve.py\", line 40, in run\n    logger.error(\"failed\", e)\n"
      "Message: 'failed'\nArguments: (KeyError(12),)\n";
  Diagnosis d = DiagnoseText(noise);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.kind, CandidateKind::kLoggedError);
  EXPECT_EQ(d.cause.type, "KeyError");
  EXPECT_EQ(d.cause.message, "12");
  EXPECT_EQ(d.cause.frame.function, "run");
  EXPECT_EQ(d.noise_blocks, 1u);
  // With a real traceback present, the real one wins.
  d = DiagnoseText(noise + Traceback("", "KeyError: 12"));
  EXPECT_EQ(d.cause.kind, CandidateKind::kTraceback);
  EXPECT_NE(d.cause.type, "TypeError");
}

TEST(AnalyzerTest, ChainRootIsFirstNonNoiseException) {
  std::string log =
      Traceback("", "TypeError: bad format", "/usr/lib/python3.12/logging/__init__.py", "format") +
      "\nDuring handling of the above exception, another exception occurred:\n\n" +
      Traceback("", "RuntimeError: real problem");
  Diagnosis d = DiagnoseText(log);
  EXPECT_EQ(d.cause.type, "RuntimeError");
  ASSERT_EQ(d.cause.chain.size(), 2u);
}

TEST(AnalyzerTest, ReversedLogGivesTheSameCauseAsForward) {
  std::string log = "2026-12-02T10:40:20.000Z [rank0]: INFO start\n" +
                    Traceback("2026-12-02T10:40:21.000Z [rank0]: ", "ValueError: bad shape") +
                    Traceback("2026-12-02T10:40:40.000Z [rank1]: ",
                              "RuntimeError: [Rank 1] Watchdog caught collective operation timeout");
  Diagnosis fwd = DiagnoseText(log);
  std::vector<std::string> lines = Lines(log);
  std::reverse(lines.begin(), lines.end());
  Diagnosis rev = DiagnoseText(Join(lines));
  EXPECT_FALSE(fwd.reversed);
  EXPECT_TRUE(rev.reversed);
  EXPECT_EQ(rev.cause.type, fwd.cause.type);
  EXPECT_EQ(rev.cause.process, fwd.cause.process);
  EXPECT_EQ(rev.cause.frame.function, fwd.cause.frame.function);
  EXPECT_EQ(rev.consequences_total, fwd.consequences_total);
}

TEST(AnalyzerTest, StreamsAreBounded) {
  std::string log;
  for (int i = 0; i < 3000; ++i) log += "(Worker pid=" + std::to_string(i) + ") INFO hello\n";
  log += "(Worker pid=99999) RuntimeError: boom\n";
  Diagnosis d = DiagnoseText(log);
  EXPECT_LE(d.streams, Analyzer::kMaxStreams + 1);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.cause.message, "boom");
}

TEST(AnalyzerTest, KeptCandidatesAreBoundedAndEarliestSurvives) {
  std::string log;
  for (int i = 0; i < 2000; ++i) {
    log += "[TP" + std::to_string(i % 8) + "] 2026-12-02 11:00:00,000 ERROR RuntimeError: late " +
           std::to_string(i) + "\n";
  }
  log += "[TP9] 2026-12-02 10:00:00,000 ERROR RuntimeError: the earliest\n";
  Diagnosis d = DiagnoseText(log);
  EXPECT_EQ(d.cause.message, "the earliest");
  EXPECT_LE(d.other_failures.size(), Diagnosis::kMaxListed);
}

TEST(AnalyzerTest, NoErrorMeansNotFound) {
  Diagnosis d = DiagnoseText("INFO 12-02 10:40:28 [metrics.py:455] 0 errors\nWARNING x error y\nplain\n");
  EXPECT_FALSE(d.found);
  EXPECT_EQ(FormatDiagnosisText(d).rfind("no failure found", 0), 0u);
}

}  // namespace
}  // namespace specd::diagnose
