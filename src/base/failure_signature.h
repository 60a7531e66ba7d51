// Known failure signatures: the table that turns an error message into a short
// name and an actionable hint, shared by `specd diagnose` (which reads logs) and
// the supervisor's failure report (src/launch, which may link only base).
//
// It lives in base because both users need it and launch links only base.
// Matching is plain substring search over a few short fields, so it is cheap
// enough to run on every error line of a multi-gigabyte log.
//
// Thread-safe: everything here is stateless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specd {

// What a failure says about itself. All fields are optional (empty = unknown).
struct FailureText {
  std::string_view type;     // exception type or status code: "KeyError", "NotFound"
  std::string_view message;  // the message after "Type: "
  std::string_view details;  // further lines: message continuations, last log lines
  std::string_view context;  // code near the raise site: source lines, function names
};

struct FailureSignature {
  std::string_view name;   // stable short id, e.g. "unsupported_gpu_arch"
  std::string_view title;  // one phrase for humans
  std::string_view hint;   // what to do about it
  // True for failures that are usually the effect of another failure
  // (a peer timing out in a collective, teardown signals).
  bool consequence;
};

// The signature table, in matching order (most specific first).
const std::vector<FailureSignature>& FailureSignatures();

// The first signature that `text` matches, or nullptr.
const FailureSignature* MatchFailureSignature(const FailureText& text);

// True when `text` describes the effect of another failure rather than a cause:
// status codes DeadlineExceeded / Unavailable / Cancelled, broken pipes and
// connection resets, collective timeouts, messages naming a dead peer, teardown
// signals ("received sigquit from a child process", "closing signal SIGTERM"),
// or text that calls itself a consequence.
bool IsConsequence(const FailureText& text);

// Ranks that `text` says never arrived or were missing, sorted and unique:
// "missing ranks: 2, 5", "rank 3 never arrived", "Rank 1 failed to pass
// monitoredBarrier", "waiting for rank 4". Empty when the text names none.
std::vector<int> FindMissingRanks(std::string_view text);

// Grouping key for "failed the same way": the type plus the message with the
// numbers that name a rank, pid or device replaced by '#', so "[Rank 3] ..."
// and "[Rank 5] ..." group while "KeyError: 12" and "KeyError: 13" do not.
std::string FailureGroupKey(std::string_view type, std::string_view message);

// For a KeyError message ("12", "'120a'", "'sm_120'", "(12, 0)"): true when
// the key looks like a GPU architecture or compute capability. Small integers
// count only when `context` shows a lookup by capability / architecture.
bool IsArchitectureKey(std::string_view key, std::string_view context);

}  // namespace specd
