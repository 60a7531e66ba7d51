#include "diagnose/analyzer.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/failure_signature.h"

namespace specd::diagnose {
namespace {

constexpr uint64_t kAbsorbWindowLines = 64;
// How far below a retry warning (in its stream's lines) a traceback header
// still belongs to it: Python's logging prints the traceback right under the
// message, which may span a few lines.
constexpr uint64_t kRetryRecordLines = 4;
constexpr size_t kMaxEvidence = 10;
constexpr size_t kMaxEvidenceText = 400;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool Contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

std::string Cap(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "...";
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// True when `v` (what follows "word:") reads as a counter or an empty value:
// "0", "0.0", "none", "null", "n/a", "false", "" — a metric, not a failure.
bool IsZeroOrEmptyValue(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '"' || v.front() == '\'')) v.remove_prefix(1);
  size_t n = 0;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) n = 1;
  while (n < v.size() && (IsIdentChar(v[n]) || v[n] == '.' || v[n] == '/')) ++n;
  std::string w(v.substr(0, n));
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::tolower(c); });
  if (w.empty() || w == "none" || w == "null" || w == "n/a" || w == "false" || w == "nil") return true;
  return std::all_of(w.begin(), w.end(),
                     [](char c) { return c == '0' || c == '.' || c == '-' || c == '+'; });
}

// Whether an unstamped line states a failure. Lines with a level stamp are
// judged by their level instead, so this runs only on raw output. Words of
// failure count as words, not as parts of metric names or counters: "CUDA
// error: out of memory", "Killed", "Segmentation fault" do; "error_rate=0.0",
// "errors_total=0", "failed_requests: 0", "Exception handler registered",
// "Error: none" and "exit code 0" do not.
bool StatesFailure(std::string_view c) {
  static constexpr std::string_view kPhrases[] = {
      "Killed", "SIGKILL", "signal 9", "out of memory", "Address already in use", "sigquit",
      "closing signal", "Segmentation fault", "core dumped", "no kernel image", "Watchdog caught",
      "never arrived", "FATAL", "Fatal"};
  for (std::string_view w : kPhrases) {
    for (size_t p = c.find(w); p != std::string_view::npos; p = c.find(w, p + 1)) {
      const bool word_start = p == 0 || !IsIdentChar(c[p - 1]);
      const size_t e = p + w.size();
      const bool word_end = e >= c.size() || !(IsIdentChar(c[e]) || c[e] == '=');
      if (word_start && word_end) return true;
    }
  }
  // "exit code N" / "exitcode: N" with N other than 0.
  for (std::string_view w : {std::string_view("exit code"), std::string_view("exitcode")}) {
    const size_t p = c.find(w);
    if (p == std::string_view::npos) continue;
    std::string_view rest = c.substr(p + w.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == ':' || rest.front() == '=')) {
      rest.remove_prefix(1);
    }
    if (!rest.empty() && !IsZeroOrEmptyValue(rest)) return true;
  }
  // "<word ending in error/Error/Exception>: <something that is not a zero>".
  for (size_t p = 0; p < c.size(); ++p) {
    if (!IsIdentChar(c[p]) || (p > 0 && IsIdentChar(c[p - 1]))) continue;
    size_t e = p;
    while (e < c.size() && (IsIdentChar(c[e]) || c[e] == '.')) ++e;
    std::string_view word = c.substr(p, e - p);
    const bool failure_word = EndsWith(word, "rror") || EndsWith(word, "xception") ||
                              EndsWith(word, "RROR");
    if (failure_word && e < c.size() && c[e] == ':' && !IsZeroOrEmptyValue(c.substr(e + 1))) {
      return true;
    }
    p = e;
  }
  return false;
}

// Whether a message tells that the failure it reports is retried or worked
// around: "retrying in 2s", "will retry", "Retry 2/5", "falling back to ...".
bool TellsOfRetry(std::string_view m) {
  std::string lower(m.substr(0, 512));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (std::string_view w : {"retry", "retrie", "retrying", "try again", "trying again",
                             "fall back", "falling back", "fallback"}) {
    if (Contains(lower, w)) return true;
  }
  return false;
}

bool ExceptionLikeType(std::string_view type) {
  return Contains(type, "Error") || Contains(type, "Exception") || EndsWith(type, "Exit") ||
         Contains(type, "Interrupt") || EndsWith(type, "Failure");
}

// What a line is within a traceback, to tell which way lines sharing a stamp run.
enum class Shape { kOther, kHeader, kFrame, kCode, kException };

Shape ShapeOf(std::string_view c) {
  if (EndsWith(c, "Traceback (most recent call last):")) return Shape::kHeader;
  Frame f;
  if (StartsWith(c, "  File \"") && ParseFrameLine(c, &f)) return Shape::kFrame;
  if (StartsWith(c, "    ")) return Shape::kCode;
  std::string_view type, msg;
  if (ParseExceptionLine(c, &type, &msg) && ExceptionLikeType(type)) return Shape::kException;
  return Shape::kOther;
}

// A rank named in a message: "local_rank: 3", "[Rank 3]", "rank=3", "rank 3".
int RankFromMessage(std::string_view m) {
  for (std::string_view key : {"local_rank: ", "local_rank=", "[Rank ", "Rank ", "rank=", "rank "}) {
    size_t p = m.find(key);
    if (p == std::string_view::npos) continue;
    size_t i = p + key.size();
    if (i >= m.size() || !std::isdigit(static_cast<unsigned char>(m[i]))) continue;
    int v = 0;
    while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i])) && v < 1000000) {
      v = v * 10 + (m[i++] - '0');
    }
    return v;
  }
  return -1;
}

// Splits "NotFound: rest" into the status code and the rest when the line
// starts with one of specd's status code names.
void SplitStatusCode(std::string_view msg, std::string* type, std::string* message) {
  static constexpr std::string_view kCodes[] = {
      "InvalidArgument", "NotFound", "Corruption", "Unsupported", "IoError", "OutOfRange",
      "DeadlineExceeded", "Unavailable", "ResourceExhausted", "Cancelled", "Internal"};
  for (std::string_view code : kCodes) {
    if (StartsWith(msg, code) && msg.size() > code.size() + 1 && msg[code.size()] == ':') {
      *type = std::string(code);
      std::string_view rest = msg.substr(code.size() + 1);
      if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      *message = Cap(rest, 2048);
      return;
    }
  }
  type->clear();
  *message = Cap(msg, 2048);
}

}  // namespace

struct Analyzer::Stream {
  std::string label;
  int rank = -1;
  TracebackParser parser;
  double last_ts = 0;
  bool has_ts = false;
  uint64_t lines = 0;
  bool has_pending = false;  // an error line that a following traceback may absorb
  Candidate pending;
  uint64_t pending_at = 0;
  bool had_cause = false;  // offered a cause-tier candidate
  // `lines` at the last line with its own level if that line was below ERROR
  // and told of a retry; 0 otherwise.
  uint64_t retry_at = 0;
  Shape last_shape = Shape::kOther;  // of the last line, when it had its own stamp
  double last_stamp = 0;
  std::vector<Candidate> held;  // handled tracebacks, until the stream goes on
};

bool AnalysisResult::LooksNewestFirstByLineStamps() const {
  return lines > 0 && stamped_lines * 20 >= lines * 19 && ts_decreases >= 3 &&
         ts_decreases > 2 * ts_increases;
}

bool AnalysisResult::LooksReversed() const {
  if (reversed_evidence > forward_evidence) return true;
  return forward_evidence == 0 && reversed_evidence == 0 && ts_decreases >= 3 &&
         ts_decreases > 2 * ts_increases;
}

Analyzer::Analyzer(int source, std::string default_process)
    : source_(source), default_process_(std::move(default_process)) {}

Analyzer::~Analyzer() = default;

Analyzer::Stream* Analyzer::GetStream(const std::string& label, int rank) {
  auto it = streams_.find(label);
  if (it == streams_.end()) {
    std::string key = label;
    if (streams_.size() >= kMaxStreams) {
      key = "(other processes)";
      it = streams_.find(key);
    }
    if (it == streams_.end()) {
      auto s = std::make_unique<Stream>();
      s->label = key.empty() ? default_process_ : key;
      it = streams_.emplace(key, std::move(s)).first;
    }
  }
  Stream* s = it->second.get();
  if (rank >= 0 && s->rank < 0) s->rank = rank;
  return s;
}

// Where a specd log line starts inside `line` after other text (a program's
// stdout without a final newline, then a stderr log line: "text2026-12-02T
// 15:27:20.901Z WARN  ..."), or npos. Only specd's exact stamp counts.
size_t GluedSpecdStamp(std::string_view line) {
  static constexpr std::string_view kLevels[] = {"ERROR ", "WARN  ", "INFO  ", "DEBUG "};
  // One pass over the line for "Z " (rare outside stamps), then the level word
  // and the 23 stamp bytes before the 'Z' ("2026-12-02T15:27:20.901").
  for (size_t p = line.find("Z ", 24); p != std::string_view::npos; p = line.find("Z ", p + 1)) {
    std::string_view rest = line.substr(p + 2);
    bool level = false;
    for (std::string_view lv : kLevels) level = level || rest.substr(0, lv.size()) == lv;
    if (!level) continue;
    double ts;
    if (ParseIsoTimestamp(line.substr(p - 23), &ts) == 24) return p - 23;
  }
  return std::string_view::npos;
}

void Analyzer::AddLine(std::string_view line, uint64_t line_no) {
  if (line.size() > 24 && line.front() != '{') {
    size_t glued = GluedSpecdStamp(line);
    if (glued != std::string_view::npos && glued > 0 &&
        line.substr(0, glued).find_first_not_of(" \t") != std::string_view::npos) {
      AddLine(line.substr(0, glued), line_no);
      line = line.substr(glued);
    }
  }
  ++order_;
  if (!line.empty() && line.front() == '{' && StartsWith(line, "{\"ts\"")) {
    HandleSpecdJson(line, line_no);
    return;
  }
  ParseLinePrefix(line, &prefix_);
  if (prefix_.specd && prefix_.label.empty() && StartsWith(prefix_.content, "rank ")) {
    // The supervisor's lines about a rank ("rank 1 (pid 7) was killed by
    // signal 9") are that rank's failure.
    int r = RankFromMessage(prefix_.content.substr(0, 16));
    if (r >= 0) {
      prefix_.rank = r;
      prefix_.label = "rank" + std::to_string(r);
    }
  }
  const bool in_block = block_.Feed(prefix_.content, line, line_no);
  if (block_.done()) CommitSupervisorRootCause(block_.TakeRootCause());
  if (in_block) return;  // restates what the ranks logged
  Stream* s = GetStream(prefix_.label, prefix_.rank);
  // Multi-line records often carry the process label on their first line only
  // ("[... TP3] Scheduler hit an exception: Traceback ..." then bare frames):
  // bare lines continue the labelled stream's open traceback.
  if (sticky_ != nullptr && sticky_ != s && !s->parser.open() && sticky_->parser.open() &&
      (prefix_.label.empty() ||
       (sticky_->label.size() > prefix_.label.size() && StartsWith(sticky_->label, prefix_.label) &&
        sticky_->label[prefix_.label.size()] == '/'))) {
    s = sticky_;
  }
  const bool record_start = prefix_.content.size() != line.size() || !has_ts_;
  double ts = 0;
  bool has_ts = false;
  if (prefix_.has_ts) {
    if (s->has_ts) {
      if (prefix_.ts < s->last_ts) ++result_.ts_decreases;
      else if (prefix_.ts > s->last_ts) ++result_.ts_increases;
    }
    s->last_ts = last_ts_ = ts = prefix_.ts;
    s->has_ts = has_ts_ = has_ts = true;
  } else if (s->has_ts) {
    ts = s->last_ts;
    has_ts = true;
  } else if (has_ts_) {
    ts = last_ts_;
    has_ts = true;
  }
  ++s->lines;
  if (!line.empty()) ++result_.lines;
  if (prefix_.has_ts) {
    ++result_.stamped_lines;
    const Shape shape = ShapeOf(prefix_.content);
    if (s->last_shape != Shape::kOther && prefix_.ts == s->last_stamp) {
      const Shape a = s->last_shape;
      if ((a == Shape::kHeader && shape == Shape::kFrame) ||
          (a == Shape::kCode && shape == Shape::kException)) {
        ++result_.tie_forward;
      } else if ((a == Shape::kFrame && shape == Shape::kHeader) ||
                 (a == Shape::kException && shape == Shape::kCode)) {
        ++result_.tie_reversed;
      }
    }
    s->last_shape = shape;
    s->last_stamp = prefix_.ts;
  } else {
    s->last_shape = Shape::kOther;
  }
  // An error line announces a traceback that follows it closely; a record
  // logged below ERROR in between ends the announcement.
  const bool lower_record = prefix_.level != Level::kNone && prefix_.level < Level::kError;
  if (s->has_pending && (s->lines - s->pending_at > kAbsorbWindowLines || lower_record)) {
    s->has_pending = false;
    Commit(std::move(s->pending));
  }
  if (prefix_.specd) {
    if (prefix_.level >= Level::kError) HandleSpecdText(s, prefix_, line, line_no, ts, has_ts);
    return;  // specd lines never belong to a Python traceback
  }
  const bool own_level = prefix_.level != Level::kNone;
  const bool below_error = own_level && prefix_.level < Level::kError;
  bool handled_record = below_error;
  if (own_level) {
    s->retry_at = below_error && TellsOfRetry(prefix_.content) ? s->lines : 0;
  } else if (s->retry_at != 0 && s->lines - s->retry_at <= kRetryRecordLines) {
    handled_record = true;
  }
  StreamLine l{prefix_.content, line,          source_,      line_no,       order_, ts,
               has_ts,          prefix_.level, record_start, handled_record};
  emitted_.clear();
  bool consumed = s->parser.Feed(l, &emitted_);
  if (s->parser.open() && !s->label.empty() && s->label != default_process_) sticky_ = s;
  for (Candidate& c : emitted_) {
    Classify(&c, s);
    Offer(s, std::move(c));
  }
  if (!consumed) {
    MaybeErrorLine(s, l);
    if (!s->held.empty() && !TrimRight(l.content).empty()) ReleaseHeld(s, /*went_on=*/true);
  }
}

void Analyzer::HandleSpecdJson(std::string_view line, uint64_t line_no) {
  if (!Contains(line, "\"level\":\"error\"")) return;  // only errors matter; skip the parse
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return;
  auto str = [&](const char* k) -> std::string {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  int rank = -1;
  if (auto it = j.find("rank"); it != j.end() && it->is_number_integer()) rank = it->get<int>();
  std::string label = rank >= 0 ? "rank" + std::to_string(rank) : std::string();
  Stream* s = GetStream(label, rank);
  double ts = 0;
  std::string ts_text = str("ts");
  bool has_ts = ParseIsoTimestamp(ts_text, &ts) > 0;
  if (has_ts) {
    s->last_ts = last_ts_ = ts;
    s->has_ts = has_ts_ = true;
  }
  ++s->lines;
  if (auto rep = j.find("report"); rep != j.end() && rep->is_object() && rank >= 0) {
    // The supervisor's failure report as one event (--log-format json): like
    // the text block, it restates the ranks' errors.
    SupervisorRootCause rc;
    rc.rank = rank;
    rc.stage = str("stage");
    rc.error = str("msg");
    rc.hint = str("hint");
    auto cons = rep->find("root_is_consequence");
    rc.root_is_consequence = cons != rep->end() && cons->is_boolean() && cons->get<bool>();
    rc.error_line = line_no;
    rc.error_text = Cap(line, kMaxEvidenceText);
    rc.valid = true;
    CommitSupervisorRootCause(std::move(rc));
    return;
  }
  Candidate c;
  c.kind = CandidateKind::kSpecdError;
  SplitStatusCode(str("msg"), &c.type, &c.message);
  c.stage = str("stage");
  c.hint = str("hint");
  c.ts = ts;
  c.has_ts = has_ts;
  c.source = source_;
  c.line = line_no;
  c.order = order_;
  c.evidence.push_back(Evidence{source_, line_no, Cap(line, kMaxEvidenceText)});
  Classify(&c, s);
  Offer(s, std::move(c));
}

void Analyzer::HandleSpecdText(Stream* s, const LinePrefix& p, std::string_view line,
                               uint64_t line_no, double ts, bool has_ts) {
  std::string_view msg = TrimRight(p.content);
  Candidate c;
  c.kind = CandidateKind::kSpecdError;
  // "... (hint: text)" at the end of the line.
  if (EndsWith(msg, ")")) {
    size_t h = msg.rfind(" (hint: ");
    if (h != std::string_view::npos) {
      c.hint = Cap(msg.substr(h + 8, msg.size() - h - 9), 1024);
      msg = msg.substr(0, h);
    }
  }
  SplitStatusCode(msg, &c.type, &c.message);
  c.stage = std::string(p.stage);
  c.ts = ts;
  c.has_ts = has_ts;
  c.source = source_;
  c.line = line_no;
  c.order = order_;
  c.evidence.push_back(Evidence{source_, line_no, Cap(line, kMaxEvidenceText)});
  Classify(&c, s);
  Offer(s, std::move(c));
}

void Analyzer::CommitSupervisorRootCause(SupervisorRootCause rc) {
  Stream* s = GetStream("rank" + std::to_string(rc.rank), rc.rank);
  if (s->had_cause) return;  // the rank's own line is the better evidence
  Candidate c;
  c.kind = CandidateKind::kSpecdError;
  c.process = s->label;
  c.rank = rc.rank;
  SplitStatusCode(rc.error, &c.type, &c.message);
  c.stage = std::move(rc.stage);
  c.hint = std::move(rc.hint);
  // The block comes after the failures it reports: it is never earlier than
  // the rank's own error line, which therefore stays the first evidence.
  c.ts = last_ts_;
  c.has_ts = has_ts_;
  c.source = source_;
  c.line = rc.error_line;
  c.order = order_;
  c.evidence.push_back(Evidence{source_, rc.error_line, Cap(rc.error_text, kMaxEvidenceText)});
  Classify(&c, s);
  if (rc.root_is_consequence) {
    c.consequence = true;
    c.tier = kTierConsequence;
  }
  Offer(s, std::move(c));
}

void Analyzer::MaybeErrorLine(Stream* s, const StreamLine& l) {
  if (l.level == Level::kDebug || l.level == Level::kInfo || l.level == Level::kWarn) return;
  std::string_view c = TrimRight(l.content);
  while (!c.empty() && (c.front() == ' ' || c.front() == '\t')) c.remove_prefix(1);
  if (c.empty()) return;
  std::string_view type, msg;
  // "Error: none" / "errors: 0" are counters, not exceptions.
  bool exc = ParseExceptionLine(c, &type, &msg) && ExceptionLikeType(type) &&
             (msg.empty() || !IsZeroOrEmptyValue(msg));
  const bool states_failure = exc || StatesFailure(c);
  if (l.level < Level::kError && !states_failure) return;
  Candidate cand;
  cand.kind = CandidateKind::kErrorLine;
  cand.level_only = !states_failure;
  if (exc) {
    cand.type = Cap(type, 256);
    cand.message = Cap(msg, 2048);
  } else {
    cand.message = Cap(c, 2048);
  }
  cand.ts = l.ts;
  cand.has_ts = l.has_ts;
  cand.source = l.source;
  cand.line = l.line;
  cand.order = l.seq;
  cand.evidence.push_back(Evidence{l.source, l.line, Cap(l.raw, kMaxEvidenceText)});
  Classify(&cand, s);
  if (cand.rank < 0) {
    cand.rank = RankFromMessage(c);
    if (cand.rank >= 0 && cand.process.empty()) cand.process = "rank" + std::to_string(cand.rank);
  }
  Offer(s, std::move(cand));
}

void Analyzer::Classify(Candidate* c, const Stream* s) {
  c->process = s->label;
  if (c->rank < 0) c->rank = s->rank;
  if (c->truncated && c->type.empty() && c->message.empty()) {
    c->message = "traceback cut off before its exception line";
  }
  FailureText ft{c->type, c->message, c->details, c->context};
  const FailureSignature* sig = MatchFailureSignature(ft);
  c->signature = sig != nullptr ? std::string(sig->name) : std::string();
  c->consequence = IsConsequence(ft);
  if (c->consequence || (sig != nullptr && sig->name == "collective_timeout")) {
    c->missing_ranks = FindMissingRanks(c->message + " " + c->details);
  }
  switch (c->kind) {
    case CandidateKind::kTraceback:
      c->tier = c->consequence                      ? kTierConsequence
                : c->truncated && c->type.empty()   ? kTierGeneric
                                                    : kTierCause;
      break;
    case CandidateKind::kSpecdError:
      c->tier = c->consequence ? kTierConsequence : kTierCause;
      break;
    case CandidateKind::kErrorLine:
      c->tier = c->consequence ? kTierConsequence : sig != nullptr ? kTierCause : kTierGeneric;
      break;
    case CandidateKind::kLoggedError:
      c->tier = !c->type.empty() || Contains(c->message, "rror") || Contains(c->message, "xception") ||
                        Contains(c->message, "ail")
                    ? kTierLogged
                    : kTierWeak;
      break;
  }
}

void Analyzer::Offer(Stream* s, Candidate c) {
  if (c.tier == kTierCause && !c.handled) s->had_cause = true;
  if (c.kind == CandidateKind::kErrorLine) {
    if (s->has_pending) Commit(std::move(s->pending));
    s->pending = std::move(c);
    s->has_pending = true;
    s->pending_at = s->lines;
    return;
  }
  if (c.kind == CandidateKind::kTraceback && s->has_pending) {
    Candidate& p = s->pending;
    bool near = s->lines - s->pending_at <= kAbsorbWindowLines;
    bool same_kind = c.consequence == p.consequence &&
                     (c.consequence || p.tier == kTierGeneric || p.signature == c.signature);
    if (near && same_kind) {
      // The line announced this traceback ("Error in model execution ..."):
      // keep it as evidence of the traceback instead of as a failure of its own.
      std::vector<Evidence> ev = std::move(p.evidence);
      for (Evidence& e : c.evidence) {
        if (ev.size() < kMaxEvidence) ev.push_back(std::move(e));
      }
      c.evidence = std::move(ev);
      c.missing_ranks.insert(c.missing_ranks.end(), p.missing_ranks.begin(), p.missing_ranks.end());
      if (p.has_ts && (!c.has_ts || p.ts < c.ts)) {
        c.ts = p.ts;
        c.has_ts = true;
      }
    } else {
      Commit(std::move(p));
    }
    s->has_pending = false;
  }
  if (c.handled && c.kind == CandidateKind::kTraceback && c.tier != kTierConsequence &&
      s->held.size() < kMaxHeld) {
    s->held.push_back(std::move(c));
    return;
  }
  Commit(std::move(c));
}

void Analyzer::ReleaseHeld(Stream* s, bool went_on) {
  for (Candidate& c : s->held) {
    if (went_on) c.tier = kTierHandled;
    Commit(std::move(c));
  }
  s->held.clear();
}

void Analyzer::Commit(Candidate c) {
  if (c.tier <= kTierLogged && c.tier != kTierWeak) {
    std::string key = FailureGroupKey(c.type, c.message);
    auto it = result_.groups.find(key);
    if (it == result_.groups.end() && result_.groups.size() < kMaxGroups) {
      it = result_.groups.emplace(key, FailureGroup{}).first;
    }
    if (it != result_.groups.end()) {
      ++it->second.count;
      if (it->second.processes.size() < kMaxGroupProcesses) {
        it->second.processes.insert(c.process.empty() ? "(unlabelled)" : c.process);
      }
    }
  }
  for (int r : c.missing_ranks) result_.missing_ranks.insert(r);
  ++result_.tier_counts[c.tier];
  std::vector<Candidate>& v = result_.tiers[c.tier];
  if (v.size() < kMaxPerTier) {
    v.push_back(std::move(c));
    return;
  }
  // Full: keep the earliest by time stamp.
  if (!c.has_ts) return;
  auto latest = std::max_element(v.begin(), v.end(), [](const Candidate& a, const Candidate& b) {
    return (a.has_ts ? a.ts : -1e300) < (b.has_ts ? b.ts : -1e300);
  });
  if (latest->has_ts && c.ts < latest->ts) *latest = std::move(c);
}

AnalysisResult Analyzer::Finish() {
  result_.stamped = has_ts_;
  block_.Finish();
  if (block_.done()) CommitSupervisorRootCause(block_.TakeRootCause());
  for (auto& [key, s] : streams_) {
    emitted_.clear();
    s->parser.Finish(&emitted_);
    for (Candidate& c : emitted_) {
      Classify(&c, s.get());
      Offer(s.get(), std::move(c));
    }
    if (s->has_pending) {
      s->has_pending = false;
      Commit(std::move(s->pending));
    }
    ReleaseHeld(s.get(), /*went_on=*/false);
    result_.noise_blocks += s->parser.noise_blocks();
    result_.forward_evidence += s->parser.forward_evidence();
    result_.reversed_evidence += s->parser.reversed_evidence();
  }
  result_.streams = streams_.size();
  return std::move(result_);
}

}  // namespace specd::diagnose
