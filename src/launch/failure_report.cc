#include "launch/failure_report.h"

#include <algorithm>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/failure_signature.h"

namespace specd::launch {
namespace {

constexpr size_t kMaxLastLines = 20;

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

bool IsCrashSignal(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT || sig == SIGILL || sig == SIGFPE;
}

bool IsStopSignal(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGQUIT || sig == SIGHUP || sig == SIGPIPE;
}

std::string Summary(const RankFailure& f) {
  if (!f.message.empty()) {
    return f.status_code.empty() ? f.message : f.status_code + ": " + f.message;
  }
  if (f.signal != 0) {
    return "killed by signal " + std::to_string(f.signal) + " (" + SignalName(f.signal) + ")";
  }
  return "exited with code " + std::to_string(f.exit_code);
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) {
    s += l;
    s += '\n';
  }
  return s;
}

// Why `f` is a consequence by what it says about itself; empty when it is not.
std::string IntrinsicConsequence(const RankFailure& f) {
  if (f.torn_down) return "stopped by teardown";
  const std::string summary = Summary(f);
  FailureText t{f.status_code, summary, "", ""};
  if (!IsConsequence(t)) return "";
  const FailureSignature* s = MatchFailureSignature(t);
  if (s != nullptr) return std::string(s->title);
  if (f.status_code == "DeadlineExceeded") return "peer timeout";
  if (f.status_code == "Unavailable") return "peer unavailable";
  if (f.status_code == "Cancelled") return "cancelled";
  return "consequence";
}

}  // namespace

std::string FormatRankList(const std::vector<int>& ranks_in) {
  std::vector<int> ranks = ranks_in;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

FailureReport BuildFailureReport(std::vector<RankFailure> failures) {
  FailureReport r;
  if (failures.empty()) return r;
  r.empty = false;
  std::stable_sort(failures.begin(), failures.end(), [](const RankFailure& a, const RankFailure& b) {
    return std::tie(a.time_s, a.rank) < std::tie(b.time_s, b.rank);
  });
  std::vector<std::string> why(failures.size());
  size_t root = failures.size();
  for (size_t i = 0; i < failures.size(); ++i) {
    why[i] = IntrinsicConsequence(failures[i]);
    if (why[i].empty() && root == failures.size()) root = i;
  }
  if (root == failures.size()) {
    root = 0;
    r.root_is_consequence = true;
  }
  const RankFailure& rf = failures[root];
  r.root = rf;
  if (r.root.last_log_lines.size() > kMaxLastLines) {
    r.root.last_log_lines.erase(r.root.last_log_lines.begin(),
                                r.root.last_log_lines.end() - kMaxLastLines);
  }
  r.root_summary = Summary(rf);
  // Signature from what the rank said; failing that, from its last log lines
  // (a rank killed by the OOM killer says nothing, its log may).
  // SIGKILL counts as an OOM kill only with the cgroup's word for it.
  const FailureSignature* sig = MatchFailureSignature(
      {rf.status_code, r.root_summary, rf.oom_kill_seen ? "oom_kill counter rose" : "", ""});
  if (sig == nullptr && !rf.last_log_lines.empty()) {
    std::string tail = JoinLines(rf.last_log_lines);
    const FailureSignature* s = MatchFailureSignature({"", "", tail, ""});
    if (s != nullptr && !s->consequence) sig = s;
  }
  if (sig != nullptr) r.signature = std::string(sig->name);
  r.hint = !rf.hint.empty() ? rf.hint : sig != nullptr ? std::string(sig->hint) : std::string();
  if (r.hint.empty() && rf.message.empty() && IsCrashSignal(rf.signal)) {
    r.hint = "the rank crashed (" + SignalName(rf.signal) +
             "): see its last log lines; rerun it under gdb or an ASan build";
  }

  const std::string root_key = FailureGroupKey(rf.status_code, r.root_summary);
  std::set<int> missing;
  struct Acc {
    FailureGroup g;
  };
  using GroupKey = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<GroupKey, Acc> cons, other;
  std::vector<GroupKey> cons_order, other_order;
  for (size_t i = 0; i < failures.size(); ++i) {
    const RankFailure& f = failures[i];
    for (int m : FindMissingRanks(f.message)) missing.insert(m);
    if (i == root) continue;
    const std::string summary = Summary(f);
    const std::string key = FailureGroupKey(f.status_code, summary);
    std::string reason = why[i];
    if (reason.empty() && !r.root_is_consequence && f.time_s >= rf.time_s && IsStopSignal(f.signal) &&
        f.message.empty()) {
      reason = "stopped after the root failure";
    }
    if (reason.empty() && key == root_key) {
      r.same_ranks.push_back(f.rank);
      continue;
    }
    auto& map = reason.empty() ? other : cons;
    auto& order = reason.empty() ? other_order : cons_order;
    GroupKey gk{f.status_code, f.stage, key, reason};
    auto it = map.find(gk);
    if (it == map.end()) {
      it = map.emplace(gk, Acc{}).first;
      it->second.g.stage = f.stage;
      it->second.g.status_code = f.status_code;
      it->second.g.summary = summary;
      it->second.g.reason = reason;
      order.push_back(gk);
    }
    it->second.g.ranks.push_back(f.rank);
  }
  std::sort(r.same_ranks.begin(), r.same_ranks.end());
  for (const auto& k : cons_order) {
    FailureGroup g = cons[k].g;
    std::sort(g.ranks.begin(), g.ranks.end());
    r.consequences.push_back(std::move(g));
  }
  for (const auto& k : other_order) {
    FailureGroup g = other[k].g;
    std::sort(g.ranks.begin(), g.ranks.end());
    r.other_failures.push_back(std::move(g));
  }
  r.missing_ranks.assign(missing.begin(), missing.end());
  return r;
}

std::string FormatFailureReportText(const FailureReport& r) {
  if (r.empty) return "no rank failed\n";
  std::string o;
  const RankFailure& f = r.root;
  o += r.root_is_consequence ? "root cause unknown; first failure seen: rank " : "root cause: rank ";
  o += std::to_string(f.rank);
  if (!f.stage.empty()) o += " [" + f.stage + "]";
  o += " failed first\n";
  o += "  error:     " + r.root_summary + "\n";
  if (!r.hint.empty()) o += "  hint:      " + r.hint + "\n";
  if (!r.signature.empty()) o += "  signature: " + r.signature + "\n";
  if (f.signal != 0) {
    o += "  exit:      signal " + std::to_string(f.signal) + " (" + SignalName(f.signal) + ")\n";
  } else {
    o += "  exit:      code " + std::to_string(f.exit_code) + "\n";
  }
  if (!r.same_ranks.empty()) {
    o += "  also failed the same way: rank(s) " + FormatRankList(r.same_ranks) + "\n";
  }
  if (!r.missing_ranks.empty()) {
    o += "  never arrived (per peers): rank(s) " + FormatRankList(r.missing_ranks) + "\n";
  }
  if (!f.last_log_lines.empty()) {
    o += "  last log lines of rank " + std::to_string(f.rank) + ":\n";
    for (const std::string& l : r.root.last_log_lines) o += "    " + l + "\n";
  }
  if (!r.consequences.empty()) {
    o += "consequences (not causes):\n";
    for (const FailureGroup& g : r.consequences) {
      o += "  rank(s) " + FormatRankList(g.ranks);
      if (!g.stage.empty()) o += " [" + g.stage + "]";
      o += ": " + g.summary + " (" + g.reason + ")\n";
    }
  }
  if (!r.other_failures.empty()) {
    o += "other failures:\n";
    for (const FailureGroup& g : r.other_failures) {
      o += "  rank(s) " + FormatRankList(g.ranks);
      if (!g.stage.empty()) o += " [" + g.stage + "]";
      o += ": " + g.summary + "\n";
    }
  }
  return o;
}

std::string FormatFailureReportJson(const FailureReport& r) {
  using nlohmann::json;
  auto group = [](const FailureGroup& g) {
    return json{{"ranks", g.ranks},     {"stage", g.stage},     {"status_code", g.status_code},
                {"summary", g.summary}, {"reason", g.reason}};
  };
  json j;
  if (r.empty) {
    j["root_cause"] = nullptr;
  } else {
    const RankFailure& f = r.root;
    j["root_cause"] = {{"rank", f.rank},
                       {"stage", f.stage},
                       {"status_code", f.status_code},
                       {"message", f.message},
                       {"summary", r.root_summary},
                       {"hint", r.hint},
                       {"signature", r.signature.empty() ? json(nullptr) : json(r.signature)},
                       {"exit_code", f.exit_code},
                       {"signal", f.signal},
                       {"time_s", f.time_s},
                       {"same_ranks", r.same_ranks},
                       {"last_log_lines", f.last_log_lines}};
  }
  j["root_is_consequence"] = r.root_is_consequence;
  json cons = json::array(), other = json::array();
  for (const FailureGroup& g : r.consequences) cons.push_back(group(g));
  for (const FailureGroup& g : r.other_failures) other.push_back(group(g));
  j["consequences"] = cons;
  j["other_failures"] = other;
  j["missing_ranks"] = r.missing_ranks;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace specd::launch
