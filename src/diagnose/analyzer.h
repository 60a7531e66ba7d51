// Reads one input's lines in order, demultiplexes them into per-process
// streams by their labels ("[TP3]", "(RayWorker pid=1)", "vllm-1  | "), runs a
// TracebackParser per stream, recognises specd's own text/JSON log lines and
// plain error lines, and classifies every failure (tier, signature,
// consequence). Memory is bounded by kMaxStreams streams and kMaxPerTier kept
// candidates per tier, whatever the input size.
//
// A traceback logged below ERROR (see StreamLine::handled_record) is held
// until its stream shows another non-blank line: then the process caught the
// exception and went on (a retry, a fallback), and it goes to kTierHandled;
// at the end of the input it keeps its own tier.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/failure_signature.h"
#include "diagnose/candidate.h"
#include "diagnose/line_prefix.h"
#include "diagnose/supervisor_block.h"
#include "diagnose/traceback_parser.h"

namespace specd::diagnose {

// The processes that failed with one (type, normalised message).
struct FailureGroup {
  std::set<std::string> processes;  // at most kMaxGroupProcesses kept
  uint64_t count = 0;               // failures, including beyond the kept set
};

// Everything one input contributed; inputs are merged by Diagnose().
struct AnalysisResult {
  std::vector<Candidate> tiers[kNumTiers];
  uint64_t tier_counts[kNumTiers] = {};
  std::map<std::string, FailureGroup> groups;
  std::set<int> missing_ranks;
  uint64_t streams = 0;
  uint64_t noise_blocks = 0;
  // Order evidence (see TracebackParser) plus time stamps going backwards.
  uint64_t forward_evidence = 0, reversed_evidence = 0;
  uint64_t ts_increases = 0, ts_decreases = 0;
  // Some line had a time stamp: lines are grouped into records (a stamped
  // line and the bare lines below it) when the input is read back to front.
  bool stamped = false;
  // Non-blank lines, and those that carry a stamp of their own.
  uint64_t lines = 0, stamped_lines = 0;
  // Traceback lines next to each other in one stream with equal stamps, in
  // the order a traceback is written (header then frame, code then
  // exception) or the reverse.
  uint64_t tie_forward = 0, tie_reversed = 0;
  bool LooksReversed() const;
  // Nearly every line has its own stamp and the stamps go backwards: an
  // export to read in stamp order (see StampOrderer).
  bool LooksNewestFirstByLineStamps() const;
  // For StampOrderer: whether lines with equal stamps are in the file's order.
  bool TiesInFileOrder() const { return tie_reversed <= tie_forward; }
};

class Analyzer {
 public:
  static constexpr size_t kMaxStreams = 1024;
  static constexpr size_t kMaxPerTier = 256;
  static constexpr size_t kMaxGroups = 4096;
  static constexpr size_t kMaxGroupProcesses = 1024;
  // Handled tracebacks a stream may hold while waiting to see it go on.
  static constexpr size_t kMaxHeld = 16;

  // `source` indexes the input; `default_process` labels lines that carry no
  // process label (e.g. the file name when several files are given; may be empty).
  Analyzer(int source, std::string default_process);
  ~Analyzer();

  void AddLine(std::string_view line, uint64_t line_no);
  // Flushes open tracebacks and returns the result. Call once.
  AnalysisResult Finish();

 private:
  struct Stream;
  Stream* GetStream(const std::string& label, int rank);
  void HandleSpecdJson(std::string_view line, uint64_t line_no);
  void HandleSpecdText(Stream* s, const LinePrefix& p, std::string_view line, uint64_t line_no,
                       double ts, bool has_ts);
  void MaybeErrorLine(Stream* s, const StreamLine& l);
  void CommitSupervisorRootCause(SupervisorRootCause rc);
  void Classify(Candidate* c, const Stream* s);
  void Offer(Stream* s, Candidate c);
  // Commits the stream's held handled tracebacks: to kTierHandled when the
  // stream went on after them, else to their own tier.
  void ReleaseHeld(Stream* s, bool went_on);
  void Commit(Candidate c);

  int source_;
  std::string default_process_;
  LinePrefix prefix_;
  SupervisorBlockParser block_;
  std::map<std::string, std::unique_ptr<Stream>, std::less<>> streams_;
  Stream* sticky_ = nullptr;  // last labelled stream that opened a traceback
  std::vector<Candidate> emitted_;
  double last_ts_ = 0;
  bool has_ts_ = false;
  uint64_t order_ = 0;  // lines analyzed so far
  AnalysisResult result_;
};

}  // namespace specd::diagnose
