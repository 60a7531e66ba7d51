#include "diagnose/supervisor_block.h"

#include <cctype>

namespace specd::diagnose {
namespace {

constexpr std::string_view kHeader = "==== specd: a rank failed; root cause first ====";

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "rank 3 [load weights] failed first" → rank 3, stage "load weights".
void ParseRankStage(std::string_view s, SupervisorRootCause* out) {
  if (!StartsWith(s, "rank ")) return;
  s.remove_prefix(5);
  int rank = 0;
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && rank < 1000000) {
    rank = rank * 10 + (s[i++] - '0');
  }
  if (i == 0) return;
  out->rank = rank;
  s.remove_prefix(i);
  if (StartsWith(s, " [")) {
    size_t close = s.rfind("] failed first");
    if (close != std::string_view::npos && close > 2) out->stage = std::string(s.substr(2, close - 2));
  }
}

}  // namespace

bool SupervisorBlockParser::Feed(std::string_view content, std::string_view raw,
                                 uint64_t line_no) {
  std::string_view t = Trim(content);
  if (t == kHeader) {
    if (in_block_) Close();
    in_block_ = true;
    current_ = SupervisorRootCause{};
    return true;
  }
  if (!in_block_) return false;
  if (StartsWith(t, "root cause: ")) {
    ParseRankStage(t.substr(12), &current_);
    current_.valid = current_.rank >= 0;
    current_.error_line = line_no;
    current_.error_text = std::string(t);
    return true;
  }
  if (StartsWith(t, "root cause unknown; first failure seen: ")) {
    ParseRankStage(t.substr(40), &current_);
    current_.valid = current_.rank >= 0;
    current_.root_is_consequence = true;
    current_.error_line = line_no;
    current_.error_text = std::string(t);
    return true;
  }
  // Quoted log lines ("    <stamp> ERROR ...") lose their indent to prefix parsing.
  auto starts_blank = [](std::string_view v) { return !v.empty() && (v.front() == ' ' || v.front() == '\t'); };
  const bool indented = starts_blank(content) || starts_blank(raw);
  if (indented) {
    if (StartsWith(t, "error:")) {
      current_.error = std::string(Trim(t.substr(6)));
      current_.error_line = line_no;
      current_.error_text = std::string(t);
    }
    else if (StartsWith(t, "hint:")) current_.hint = std::string(Trim(t.substr(5)));
    return true;
  }
  if (t == "consequences (not causes):" || t == "other failures:" || t == "no rank failed") {
    return true;
  }
  Close();
  return false;
}

void SupervisorBlockParser::Finish() {
  if (in_block_) Close();
}

void SupervisorBlockParser::Close() {
  in_block_ = false;
  if (current_.valid) {
    finished_ = std::move(current_);
    done_ = true;
  }
  current_ = SupervisorRootCause{};
}

SupervisorRootCause SupervisorBlockParser::TakeRootCause() {
  done_ = false;
  SupervisorRootCause r = std::move(finished_);
  finished_ = SupervisorRootCause{};
  return r;
}

}  // namespace specd::diagnose
