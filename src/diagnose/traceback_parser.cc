#include "diagnose/traceback_parser.h"

#include <algorithm>
#include <cctype>

namespace specd::diagnose {
namespace {

constexpr std::string_view kHeader = "Traceback (most recent call last):";
constexpr size_t kMaxEvidenceText = 400;
constexpr size_t kMaxField = 2048;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool Contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Cap(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "...";
}

Evidence MakeEvidence(const StreamLine& l) {
  return Evidence{l.source, l.line, Cap(l.raw, kMaxEvidenceText)};
}

bool IsChainMarker(std::string_view c) {
  return StartsWith(c, "During handling of the above exception") ||
         StartsWith(c, "The above exception was the direct cause");
}

// Standard library, torch internals and import machinery: never the place to fix.
bool IsLibraryFrame(std::string_view path) {
  if (StartsWith(path, "<frozen") || StartsWith(path, "<string>")) return true;
  if (EndsWith(path, "logging/__init__.py")) return true;
  if (Contains(path, "/torch/") || StartsWith(path, "torch/")) return true;
  bool site = Contains(path, "site-packages") || Contains(path, "dist-packages");
  if (!site && (Contains(path, "/lib/python3") || Contains(path, "/lib64/python3"))) return true;
  return false;
}

bool IsSitePackages(std::string_view path) {
  return Contains(path, "site-packages") || Contains(path, "dist-packages");
}

}  // namespace

bool ParseFrameLine(std::string_view s, Frame* frame) {
  std::string_view t = s;
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  if (!StartsWith(t, "File \"") || t.size() == s.size()) return false;
  t.remove_prefix(6);
  size_t q = t.find("\", line ");
  if (q == std::string_view::npos) return false;
  frame->file = Cap(t.substr(0, q), 512);
  t.remove_prefix(q + 8);
  int n = 0;
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) && n < 100000000) {
    n = n * 10 + (t[i++] - '0');
  }
  frame->line = n;
  t.remove_prefix(i);
  frame->function.clear();
  if (StartsWith(t, ", in ")) frame->function = Cap(Trim(t.substr(5)), 256);
  frame->code.clear();
  return true;
}

bool ParseExceptionLine(std::string_view s, std::string_view* type, std::string_view* message) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  size_t i = 0;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.')) {
    ++i;
  }
  std::string_view t = s.substr(0, i);
  if (t.back() == '.') return false;
  size_t dot = t.rfind('.');
  std::string_view last = dot == std::string_view::npos ? t : t.substr(dot + 1);
  if (last.empty() || !(std::isalpha(static_cast<unsigned char>(last[0])) || last[0] == '_')) return false;
  if (!std::any_of(last.begin(), last.end(), [](char c) { return c >= 'a' && c <= 'z'; })) return false;
  if (i == s.size()) {
    *type = t;
    *message = {};
    return true;
  }
  if (s[i] != ':') return false;
  *type = t;
  std::string_view m = s.substr(i + 1);
  if (!m.empty() && m.front() == ' ') m.remove_prefix(1);
  *message = m;
  return true;
}

const Frame* ProjectFrame(const std::vector<Frame>& frames) {
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!IsLibraryFrame(it->file) && !IsSitePackages(it->file)) return &*it;
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!IsLibraryFrame(it->file)) return &*it;
  }
  return frames.empty() ? nullptr : &frames.back();
}

void TracebackParser::StartTraceback(const StreamLine& l, std::string_view prelude) {
  cur_ = Exception{};
  cur_.noise = logging_error_;
  cur_.handled = l.handled_record;
  cur_.link = std::move(pending_link_);
  pending_link_.clear();
  cur_.ts = l.ts;
  cur_.has_ts = l.has_ts;
  cur_.source = l.source;
  cur_.header_line = l.line;
  cur_.seq = l.seq;
  cur_.evidence.push_back(MakeEvidence(l));
  (void)prelude;
  state_ = State::kFrames;
  expect_first_frame_ = true;
}

void TracebackParser::AddFrame(const StreamLine& l, Frame f) {
  f.log_line = l.line;
  if (cur_.frames.size() == kMaxFrames) cur_.frames.erase(cur_.frames.begin());
  cur_.frames.push_back(std::move(f));
  ++cur_.total_frames;
}

void TracebackParser::EndException(bool truncated) {
  cur_.truncated = truncated;
  if (!cur_.frames.empty() && EndsWith(cur_.frames.back().file, "logging/__init__.py")) {
    cur_.noise = true;
  }
  if (chain_.size() < kMaxChain) {
    chain_.push_back(std::move(cur_));
  } else {
    ++chain_dropped_;
    chain_.back() = std::move(cur_);
  }
  cur_ = Exception{};
}

void TracebackParser::FinishChain(std::vector<Candidate>* out) {
  if (chain_.empty()) return;
  const Exception* root = nullptr;
  for (const Exception& e : chain_) {
    if (!e.noise) {
      root = &e;
      break;
    }
  }
  if (root == nullptr) {
    ++noise_blocks_;
    chain_.clear();
    chain_dropped_ = 0;
    return;
  }
  Candidate c;
  c.kind = CandidateKind::kTraceback;
  c.type = root->type;
  c.message = root->message;
  c.details = root->details;
  c.truncated = root->truncated;
  c.handled = chain_.front().handled;  // the record that printed the whole chain
  c.ts = root->ts;
  c.has_ts = root->has_ts;
  c.source = root->source;
  c.line = root->truncated ? root->header_line : root->line;
  c.order = root->seq;
  if (const Frame* f = ProjectFrame(root->frames)) {
    c.has_frame = true;
    c.frame = *f;
  }
  // Code and function names of the innermost frames tell how a key was looked up.
  size_t from = root->frames.size() > 3 ? root->frames.size() - 3 : 0;
  for (size_t i = from; i < root->frames.size(); ++i) {
    c.context += root->frames[i].function + " " + root->frames[i].code + "\n";
  }
  if (!root->evidence.empty()) c.evidence.push_back(root->evidence.front());
  if (c.has_frame) {
    std::string text = "File \"" + c.frame.file + "\", line " + std::to_string(c.frame.line) +
                       ", in " + c.frame.function;
    if (!c.frame.code.empty()) text += ": " + c.frame.code;
    c.evidence.push_back(Evidence{root->source, c.frame.log_line, Cap(text, kMaxEvidenceText)});
  }
  for (size_t i = 1; i < root->evidence.size() && i < 4; ++i) c.evidence.push_back(root->evidence[i]);
  for (const Exception& e : chain_) {
    std::string s = e.type.empty() ? "(truncated traceback)" : e.type;
    if (!e.message.empty()) s += ": " + Cap(e.message, 200);
    if (e.noise) s += " [logging noise]";
    c.chain.push_back(std::move(s));
    if (&e != root && e.evidence.size() > 1 && c.evidence.size() < 8) {
      c.evidence.push_back(e.evidence[1]);
    }
  }
  if (chain_dropped_ > 0) {
    c.chain.insert(c.chain.end() - 1, "(" + std::to_string(chain_dropped_) + " more chained exceptions)");
  }
  out->push_back(std::move(c));
  chain_.clear();
  chain_dropped_ = 0;
}

void TracebackParser::FinishLogged(std::vector<Candidate>* out) {
  logging_error_ = false;
  state_ = State::kIdle;
  if (logged_.message.empty() && logged_.details.empty()) return;
  if (const Frame* f = ProjectFrame(logged_frames_)) {
    logged_.has_frame = true;
    logged_.frame = *f;
    logged_.context = f->function + " " + f->code;
  }
  // "Arguments: (KeyError(12),)" carries the exception the record was about.
  const std::string args_copy = logged_.details;  // details is rewritten below
  std::string_view args = args_copy;
  for (size_t p = args.find('('); p != std::string_view::npos; p = args.find('(', p + 1)) {
    size_t b = p;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(args[b - 1])) || args[b - 1] == '_' ||
                     args[b - 1] == '.')) {
      --b;
    }
    std::string_view name = args.substr(b, p - b);
    if (EndsWith(name, "Error") || EndsWith(name, "Exception")) {
      size_t close = args.find(')', p);
      std::string_view inner = args.substr(p + 1, close == std::string_view::npos ? 0 : close - p - 1);
      logged_.type = std::string(name);
      logged_.details = "logged message: " + logged_.message + "; " + args_copy;
      logged_.message = std::string(Trim(inner));
      break;
    }
  }
  out->push_back(std::move(logged_));
  logged_ = Candidate{};
  logged_frames_.clear();
}

bool TracebackParser::FeedIdle(const StreamLine& l) {
  std::string_view c = l.content;
  if (c == "--- Logging error ---") {
    logging_error_ = true;
    logged_ = Candidate{};
    logged_.kind = CandidateKind::kLoggedError;
    logged_.source = l.source;
    logged_.line = l.line;
    logged_.order = l.seq;
    logged_.ts = l.ts;
    logged_.has_ts = l.has_ts;
    logged_frames_.clear();
    return true;
  }
  if (EndsWith(c, kHeader)) {
    if (prev_was_frame_ && l.record_start) ++reversed_;
    StartTraceback(l, c.substr(0, c.size() - kHeader.size()));
    return true;
  }
  if (logging_error_ && (StartsWith(c, "Call stack:") || StartsWith(c, "Message: "))) {
    state_ = State::kLogCallStack;
    if (StartsWith(c, "Call stack:")) return true;
  }
  return state_ == State::kLogCallStack;
}

bool TracebackParser::Feed(const StreamLine& l, std::vector<Candidate>* out) {
  std::string_view c = l.content;
  Frame frame;
  const bool is_frame = ParseFrameLine(c, &frame) && StartsWith(c, "  File");
  bool consumed = false;
  bool again = true;
  while (again) {
    again = false;
    switch (state_) {
      case State::kIdle:
        consumed = FeedIdle(l);
        if (state_ == State::kLogCallStack && consumed && !StartsWith(c, "Call stack:")) {
          again = true;  // "Message:" without a call stack: parse it as part of the block
        }
        break;
      case State::kFrames:
        if (is_frame) {
          if (expect_first_frame_ && l.record_start) ++forward_;
          expect_first_frame_ = false;
          AddFrame(l, std::move(frame));
          consumed = true;
        } else if (!c.empty() && (c.front() == ' ' || c.front() == '\t')) {
          if (!cur_.frames.empty() && cur_.frames.back().code.empty()) {
            std::string_view code = Trim(c);
            if (!code.empty() && code.find_first_not_of("^~") != std::string_view::npos) {
              cur_.frames.back().code = Cap(code, 300);
            }
          }
          consumed = true;
        } else if (c.empty()) {
          consumed = true;
        } else if (EndsWith(c, kHeader)) {
          EndException(true);
          FinishChain(out);
          StartTraceback(l, c.substr(0, c.size() - kHeader.size()));
          consumed = true;
        } else {
          std::string_view type, message;
          expect_first_frame_ = false;
          if (ParseExceptionLine(c, &type, &message)) {
            cur_.type = Cap(type, 256);
            cur_.message = Cap(message, kMaxField);
            cur_.line = l.line;
            cur_.seq = l.seq;
            if (l.has_ts) {
              cur_.ts = l.ts;
              cur_.has_ts = true;
            }
            cur_.evidence.push_back(MakeEvidence(l));
            exception_level_ = l.level;
            blank_ = 0;
            continuation_ = 0;
            EndException(false);
            state_ = State::kAfterException;
            consumed = true;
          } else {
            EndException(true);
            FinishChain(out);
            state_ = State::kIdle;
            again = true;
          }
        }
        break;
      case State::kAfterException:
        if (c.empty()) {
          if (++blank_ > 2) {
            FinishChain(out);
            state_ = State::kIdle;
          }
          consumed = true;
        } else if (IsChainMarker(c)) {
          pending_link_ = Cap(c, 120);
          state_ = State::kChainGap;
          consumed = true;
        } else if (EndsWith(c, kHeader)) {
          FinishChain(out);
          state_ = State::kIdle;
          again = true;
        } else if (logging_error_ && StartsWith(c, "Call stack:")) {
          FinishChain(out);
          state_ = State::kLogCallStack;
          consumed = true;
        } else if (blank_ == 0 && continuation_ < kMaxContinuation && !is_frame &&
                   l.level == exception_level_ &&
                   !chain_.empty()) {
          Exception& e = chain_.back();
          if (e.details.size() < kMaxField) {
            if (!e.details.empty()) e.details += " | ";
            e.details += Cap(Trim(c), 400);
          }
          if (continuation_ < 2) e.evidence.push_back(MakeEvidence(l));
          ++continuation_;
          consumed = true;
        } else {
          FinishChain(out);
          state_ = State::kIdle;
          again = true;
        }
        break;
      case State::kChainGap:
        if (c.empty()) {
          consumed = true;
        } else if (EndsWith(c, kHeader)) {
          StartTraceback(l, c.substr(0, c.size() - kHeader.size()));
          consumed = true;
        } else {
          FinishChain(out);
          state_ = State::kIdle;
          again = true;
        }
        break;
      case State::kLogCallStack:
        if (is_frame) {
          frame.log_line = l.line;
          if (logged_frames_.size() == kMaxFrames) logged_frames_.erase(logged_frames_.begin());
          logged_frames_.push_back(std::move(frame));
          consumed = true;
        } else if (!c.empty() && (c.front() == ' ' || c.front() == '\t')) {
          if (!logged_frames_.empty() && logged_frames_.back().code.empty()) {
            logged_frames_.back().code = Cap(Trim(c), 300);
          }
          consumed = true;
        } else if (StartsWith(c, "Message: ")) {
          std::string_view m = Trim(c.substr(9));
          if (m.size() >= 2 && (m.front() == '\'' || m.front() == '"') && m.back() == m.front()) {
            m = m.substr(1, m.size() - 2);
          }
          logged_.message = Cap(m, kMaxField);
          logged_.evidence.push_back(MakeEvidence(l));
          if (logged_.line == 0) logged_.line = l.line;
          consumed = true;
        } else if (StartsWith(c, "Arguments: ")) {
          logged_.details = Cap(Trim(c.substr(11)), kMaxField);
          logged_.evidence.push_back(MakeEvidence(l));
          FinishLogged(out);
          consumed = true;
        } else {
          FinishLogged(out);
          again = true;
        }
        break;
    }
  }
  if (!consumed && state_ == State::kIdle) logging_error_ = false;
  prev_was_frame_ = is_frame;
  return consumed;
}

void TracebackParser::Finish(std::vector<Candidate>* out) {
  switch (state_) {
    case State::kFrames:
      EndException(true);
      FinishChain(out);
      break;
    case State::kAfterException:
    case State::kChainGap:
      FinishChain(out);
      break;
    case State::kLogCallStack:
      FinishLogged(out);
      break;
    case State::kIdle:
      break;
  }
  state_ = State::kIdle;
}

}  // namespace specd::diagnose
