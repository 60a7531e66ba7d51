// Parses one process's line stream (labels and stamps already removed) for
// Python tracebacks, chained exceptions and "--- Logging error ---" blocks.
//
// A traceback is: "Traceback (most recent call last):" (possibly at the end of
// a log message), frames ("  File "p", line N, in f" + code lines), then the
// exception line "Type: message" and up to a few continuation lines. Chains
// are joined by "During handling of the above exception, another exception
// occurred:" or "The above exception was the direct cause of the following
// exception:"; the candidate reports the chain's first exception that is not
// noise. A traceback with no exception line is emitted as truncated.
//
// Memory is bounded: only the last kMaxFrames frames of a traceback and the
// first kMaxChain exceptions of a chain are kept.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/candidate.h"
#include "diagnose/line_prefix.h"

namespace specd::diagnose {

struct StreamLine {
  std::string_view content;  // the line without prefixes
  std::string_view raw;      // the whole line, for evidence
  int source = 0;
  uint64_t line = 0;
  uint64_t seq = 0;  // position in the order lines were analyzed (Candidate::order)
  double ts = 0;
  bool has_ts = false;
  Level level = Level::kNone;
  // The line starts a log record: it carries a collector's prefix, or no line
  // of the input so far had a time stamp (then every line is its own record).
  // False for the bare continuation lines of a multi-line record.
  bool record_start = true;
  // The line belongs to a record logged below ERROR: its own level is DEBUG
  // to WARNING, or it follows closely, without a level of its own, a line of
  // such a level that tells of a retry or a fallback. A traceback whose first
  // header is such a line was caught and logged by the process.
  bool handled_record = false;
};

// Parses "  File "path", line 12, in func". False when `s` is not a frame line.
bool ParseFrameLine(std::string_view s, Frame* frame);
// Parses "pkg.TypeName: message" / "TypeName". The type's last component must
// start with a letter or '_' and contain a lower-case letter ("KeyError", not "ERROR").
bool ParseExceptionLine(std::string_view s, std::string_view* type, std::string_view* message);
// The innermost frame in the project's own code: frames in the standard
// library, torch/, <frozen ...>, logging/__init__.py are skipped, then frames
// in site-packages unless nothing else remains. Null when `frames` is empty.
const Frame* ProjectFrame(const std::vector<Frame>& frames);

class TracebackParser {
 public:
  static constexpr size_t kMaxFrames = 48;
  static constexpr size_t kMaxChain = 8;
  static constexpr int kMaxContinuation = 6;

  // Consumes `l` if it belongs to a traceback or logging-error block and
  // returns true; returns false for any other line (the caller looks at it).
  // Finished failures are appended to *out (type, message, frame, evidence,
  // chain, ts, source/line, order are set; process, tier and signature are not).
  bool Feed(const StreamLine& l, std::vector<Candidate>* out);
  // Emits what is still open (a traceback cut off by the end of the log).
  void Finish(std::vector<Candidate>* out);
  // True while a traceback or logging-error block is open.
  bool open() const { return state_ != State::kIdle; }

  // Order evidence: a header whose previous line in this stream is a frame
  // line means the log is reversed (newest first); a header followed by a
  // frame line means normal order. Only lines that start records count: the
  // lines inside one multi-line record keep their order in either export.
  uint64_t forward_evidence() const { return forward_; }
  uint64_t reversed_evidence() const { return reversed_; }
  uint64_t noise_blocks() const { return noise_blocks_; }

 private:
  enum class State { kIdle, kFrames, kAfterException, kChainGap, kLogCallStack };

  struct Exception {
    std::string type, message, details;
    std::vector<Frame> frames;  // the last kMaxFrames frames, outermost first
    uint64_t total_frames = 0;
    bool noise = false;
    bool truncated = false;
    bool handled = false;            // its header was a handled_record line
    std::vector<Evidence> evidence;  // header, exception line, continuations
    std::string link;                // how the previous exception led to this one
    double ts = 0;
    bool has_ts = false;
    int source = 0;
    uint64_t header_line = 0, line = 0, seq = 0;
  };

  void StartTraceback(const StreamLine& l, std::string_view prelude);
  void AddFrame(const StreamLine& l, Frame f);
  void EndException(bool truncated);
  void FinishChain(std::vector<Candidate>* out);
  void FinishLogged(std::vector<Candidate>* out);
  bool FeedIdle(const StreamLine& l);

  State state_ = State::kIdle;
  Exception cur_;
  std::vector<Exception> chain_;
  uint64_t chain_dropped_ = 0;
  std::string pending_link_;
  int blank_ = 0;
  int continuation_ = 0;
  Level exception_level_ = Level::kNone;
  bool logging_error_ = false;   // inside "--- Logging error ---"
  Candidate logged_;             // the logging error's Message/Arguments/Call stack
  std::vector<Frame> logged_frames_;
  bool prev_was_frame_ = false;
  bool expect_first_frame_ = false;
  uint64_t forward_ = 0, reversed_ = 0, noise_blocks_ = 0;
};

}  // namespace specd::diagnose
