// A failure found in a log: a finished Python traceback, a specd ERROR line, a
// plain error line or the text of a "--- Logging error ---" block, with where
// it was seen. The analyzer ranks candidates by tier, then by time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specd::diagnose {

// Tiers, best first. The root cause is the earliest candidate of the best
// non-empty tier; kTierHandled never names one.
enum Tier : int {
  kTierCause = 0,        // traceback, specd error, known non-consequence signature, killed process
  kTierGeneric = 1,      // ERROR-level or exception-looking line, truncated traceback
  kTierLogged = 2,       // "Message:/Arguments:" of a logging error that carries an error
  kTierConsequence = 3,  // peers timing out, teardown, broken pipes
  kTierWeak = 4,         // other logging-error messages
  kTierHandled = 5,      // tracebacks logged below ERROR after which the process went on
  kNumTiers = 6,
};

enum class CandidateKind { kTraceback, kSpecdError, kErrorLine, kLoggedError };

// A Python stack frame: "  File "path", line N, in function" plus its code line.
struct Frame {
  std::string file;
  int line = 0;
  std::string function;
  std::string code;
  uint64_t log_line = 0;  // where the frame line is in the log
};

// One log line quoted as evidence. `source` indexes the input files.
struct Evidence {
  int source = 0;
  uint64_t line = 0;
  std::string text;
};

struct Candidate {
  CandidateKind kind = CandidateKind::kErrorLine;
  int tier = kTierGeneric;
  std::string process;  // stream label ("TP3", "rank1", "vllm-1/TP0"); may be empty
  int rank = -1;
  std::string type;     // exception type or status code; may be empty
  std::string message;  // first line of the message
  std::string details;  // continuation lines, " | "-joined
  std::string stage;    // specd stage
  std::string hint;     // from the line itself (specd "(hint: ...)")
  std::string context;  // code and function names near the raise (for signatures)
  bool has_frame = false;
  Frame frame;          // innermost frame in the project's own code
  std::string signature;  // FailureSignature::name, or empty
  bool consequence = false;
  bool truncated = false;  // a traceback without its exception line
  bool noise = false;      // raised inside the logging module
  // A traceback logged in a record below ERROR (a retry, a fallback): the
  // process caught the exception. See StreamLine::handled_record.
  bool handled = false;
  // An error line kept only for its level: its text states no failure (a
  // progress bar on stderr that a collector marked ERROR).
  bool level_only = false;
  double ts = 0;
  bool has_ts = false;
  uint64_t order = 0;  // position of its key line in analysis order, within its source
  int source = 0;
  uint64_t line = 0;   // the log line that states the error
  std::vector<Evidence> evidence;
  std::vector<int> missing_ranks;
  std::vector<std::string> chain;  // "Type: message" of each chained exception, first first
};

}  // namespace specd::diagnose
