#include "diagnose/diagnose.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "base/failure_signature.h"
#include "diagnose/record_order.h"
#include "diagnose/analyzer.h"

namespace specd::diagnose {
namespace {

// Orders candidates by time when every one has a stamp, else by position.
void SortEarliestFirst(std::vector<Candidate>* v) {
  bool all_ts = std::all_of(v->begin(), v->end(), [](const Candidate& c) { return c.has_ts; });
  std::stable_sort(v->begin(), v->end(), [all_ts](const Candidate& a, const Candidate& b) {
    if (all_ts && a.ts != b.ts) return a.ts < b.ts;
    if (a.source != b.source) return a.source < b.source;
    return a.order < b.order;
  });
}

bool IsKillSignature(const std::string& signature) {
  return signature == "killed" || signature == "oom_killed";
}

// Whether `a` happened before `b`: by time stamps when both have one, else by
// position within one input. Unstamped candidates of different inputs are not
// ordered.
bool HappenedBefore(const Candidate& a, const Candidate& b) {
  if (a.has_ts && b.has_ts && a.ts != b.ts) return a.ts < b.ts;
  return a.source == b.source && a.order < b.order;
}

// A process killed from outside (a shell's "Killed", an agent's "exitcode:
// -9", the kernel's OOM killer) after another failure was stated is a
// consequence of that failure: launchers kill what is left once a child
// failed, and schedulers kill a process that hung after its error. A kill is
// a cause only when nothing failed before it. Only kills seen as log lines
// move; a root cause the supervisor named stays where it is.
void DemoteKillsAfterFailures(std::vector<Candidate>* tiers, uint64_t* counts) {
  auto is_failure = [](const Candidate& c) {
    return !c.consequence && !c.level_only && !IsKillSignature(c.signature);
  };
  auto failed_before = [&](const Candidate& kill) {
    for (int t : {kTierCause, kTierGeneric}) {
      for (const Candidate& c : tiers[t]) {
        if (is_failure(c) && HappenedBefore(c, kill)) return true;
      }
    }
    return false;
  };
  std::vector<Candidate>& causes = tiers[kTierCause];
  std::vector<bool> late(causes.size(), false);
  bool any_late = false;
  for (size_t i = 0; i < causes.size(); ++i) {
    const Candidate& c = causes[i];
    late[i] =
        c.kind == CandidateKind::kErrorLine && IsKillSignature(c.signature) && failed_before(c);
    any_late = any_late || late[i];
  }
  if (!any_late) return;
  std::vector<Candidate> kept;
  for (size_t i = 0; i < causes.size(); ++i) {
    if (!late[i]) {
      kept.push_back(std::move(causes[i]));
      continue;
    }
    causes[i].consequence = true;
    causes[i].tier = kTierConsequence;
    tiers[kTierConsequence].push_back(std::move(causes[i]));
    --counts[kTierCause];
    ++counts[kTierConsequence];
  }
  causes = std::move(kept);
  SortEarliestFirst(&tiers[kTierConsequence]);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

void AddStats(ReadStats* into, const ReadStats& s) {
  into->bytes += s.bytes;
  into->lines += s.lines;
  into->binary_lines += s.binary_lines;
  into->truncated_lines += s.truncated_lines;
}

Diagnosis Combine(std::vector<AnalysisResult> results, std::vector<std::string> sources) {
  Diagnosis d;
  d.sources = std::move(sources);
  std::vector<Candidate> tiers[kNumTiers];
  uint64_t counts[kNumTiers] = {};
  std::map<std::string, FailureGroup> groups;
  std::set<int> missing;
  for (AnalysisResult& r : results) {
    for (int t = 0; t < kNumTiers; ++t) {
      counts[t] += r.tier_counts[t];
      for (Candidate& c : r.tiers[t]) tiers[t].push_back(std::move(c));
    }
    for (auto& [key, g] : r.groups) {
      FailureGroup& into = groups[key];
      into.count += g.count;
      for (const std::string& p : g.processes) {
        // The same label in different files is a different process.
        const std::string file = BaseName(d.sources[&r - results.data()]);
        into.processes.insert(results.size() > 1 && p != file ? p + "@" + file : p);
      }
    }
    missing.insert(r.missing_ranks.begin(), r.missing_ranks.end());
    d.streams += r.streams;
    d.noise_blocks += r.noise_blocks;
  }
  for (auto& v : tiers) SortEarliestFirst(&v);
  DemoteKillsAfterFailures(tiers, counts);
  d.missing_ranks.assign(missing.begin(), missing.end());

  int best = -1;
  for (int t : {kTierCause, kTierGeneric, kTierLogged, kTierConsequence, kTierWeak}) {
    if (!tiers[t].empty()) {
      best = t;
      break;
    }
  }
  if (counts[kTierHandled] > 0) {
    d.notes.push_back(std::to_string(counts[kTierHandled]) +
                      " traceback(s) logged below ERROR, after which the process went on (a "
                      "retry or a fallback), not counted as failures");
  }
  if (best < 0) return d;
  d.found = true;
  d.cause = tiers[best].front();
  // A kill seen from outside (kernel OOM killer, a shell's "Killed") names no
  // rank; a supervisor line about the same kill usually does ("exitcode: -9
  // local_rank: 1"). Join them.
  const Candidate* joined = nullptr;
  auto is_kill = [](const std::string& sig) { return sig == "oom_killed" || sig == "killed"; };
  if (d.cause.rank < 0 && is_kill(d.cause.signature)) {
    for (int t : {kTierCause, kTierGeneric}) {
      for (const Candidate& k : tiers[t]) {
        bool near = !(k.has_ts && d.cause.has_ts) || std::abs(k.ts - d.cause.ts) < 60;
        if (&k != &tiers[best].front() && is_kill(k.signature) && k.rank >= 0 && near &&
            joined == nullptr) {
          joined = &k;
        }
      }
    }
    if (joined != nullptr) {
      d.cause.rank = joined->rank;
      if (d.cause.process.empty()) d.cause.process = joined->process;
      for (const Evidence& e : joined->evidence) d.cause.evidence.push_back(e);
    }
  }
  // A SIGKILL is blamed on the OOM killer only when the log has its line
  // (within a minute of the kill).
  if (d.cause.signature == "killed") {
    for (const auto& tier : tiers) {
      for (const Candidate& k : tier) {
        const bool near = !(k.has_ts && d.cause.has_ts) || std::abs(k.ts - d.cause.ts) < 60;
        if (k.signature == "oom_killed" && near) d.cause.signature = "oom_killed";
      }
    }
  }
  d.cause_is_consequence = best == kTierConsequence;
  for (const FailureSignature& s : FailureSignatures()) {
    if (s.name == d.cause.signature) {
      d.signature = std::string(s.name);
      d.signature_title = std::string(s.title);
      d.hint = std::string(s.hint);
    }
  }
  if (!d.cause.hint.empty()) d.hint = d.cause.hint;
  if (!d.missing_ranks.empty() && (d.cause_is_consequence || d.signature == "collective_timeout")) {
    d.hint += (d.hint.empty() ? "" : " ");
    d.hint += "The log names rank(s) " + RankList(d.missing_ranks) + " as never arriving.";
  }
  if (d.cause_is_consequence) {
    d.notes.push_back(
        "only consequences were found: the process that failed first left no error in these logs");
  }

  const std::string cause_key = FailureGroupKey(d.cause.type, d.cause.message);
  if (auto it = groups.find(cause_key); it != groups.end() && best <= kTierLogged) {
    d.same_way_count = it->second.processes.size();
    for (const std::string& p : it->second.processes) {
      if (d.same_way_processes.size() < Diagnosis::kMaxListed) d.same_way_processes.push_back(p);
    }
  } else {
    d.same_way_count = 1;
    if (!d.cause.process.empty()) d.same_way_processes.push_back(d.cause.process);
  }

  for (const Candidate& c : tiers[kTierConsequence]) {
    if (best == kTierConsequence && &c == &tiers[best].front()) continue;
    if (d.consequences.size() < Diagnosis::kMaxListed) d.consequences.push_back(c);
  }
  d.consequences_total = counts[kTierConsequence] - (best == kTierConsequence ? 1 : 0);
  for (int t : {kTierCause, kTierGeneric, kTierLogged}) {
    for (const Candidate& c : tiers[t]) {
      if ((t == best && &c == &tiers[best].front()) || &c == joined) continue;
      if (FailureGroupKey(c.type, c.message) == cause_key) continue;
      ++d.other_failures_total;
      if (d.other_failures.size() < Diagnosis::kMaxListed) d.other_failures.push_back(c);
    }
  }
  return d;
}

// Whether the forward pass calls for reading the input again back to front.
bool ReadAgainBackward(const AnalysisResult& r) {
  return r.LooksNewestFirstByLineStamps() || r.LooksReversed();
}

// Feeds `backward` the input in time order, given `source` that yields its
// lines last to first and the forward pass's result `r`: by line stamps when
// every line has one, else record by record when some have, else line by line.
void AnalyzeBackward(const AnalysisResult& r, const RecordReverser::Source& source,
                     Analyzer* backward) {
  std::string_view line;
  uint64_t no;
  if (r.LooksNewestFirstByLineStamps()) {
    StampOrderer ordered(source, r.TiesInFileOrder());
    while (ordered.Next(&line, &no)) backward->AddLine(line, no);
  } else if (r.stamped) {
    RecordReverser records(source);
    while (records.Next(&line, &no)) backward->AddLine(line, no);
  } else {
    while (source(&line, &no)) backward->AddLine(line, no);
  }
}

// Reads one input forward, and again backward when it looks reversed.
Status AnalyzeFd(int fd, bool seekable, const std::string& name, int source,
                 const std::string& default_process, const DiagnoseOptions& options,
                 std::FILE* spool, AnalysisResult* out, ReadStats* stats, bool* reversed,
                 std::vector<std::string>* notes) {
  auto reader = NewForwardLineReader(fd, name, options.max_line_bytes, spool,
                                     options.stdin_spool_limit);
  Analyzer forward(source, default_process);
  std::string_view line;
  uint64_t no;
  while (reader->Next(&line, &no)) forward.AddLine(line, no);
  if (!reader->status().ok()) return reader->status();
  AddStats(stats, reader->stats());
  AnalysisResult r = forward.Finish();
  *reversed = false;
  if (options.detect_reversed && ReadAgainBackward(r)) {
    int back_fd = -1;
    if (seekable) {
      back_fd = fd;
    } else if (spool != nullptr && SpoolComplete(*reader) && std::fflush(spool) == 0) {
      back_fd = fileno(spool);
    }
    if (back_fd >= 0) {
      auto back = NewBackwardLineReader(back_fd, name, reader->stats().lines, options.max_line_bytes);
      Analyzer backward(source, default_process);
      const bool by_stamps = r.LooksNewestFirstByLineStamps();
      AnalyzeBackward(
          r, [&back](std::string_view* l, uint64_t* n) { return back->Next(l, n); }, &backward);
      if (!back->status().ok()) return back->status();
      r = backward.Finish();
      *reversed = true;
      notes->push_back(name + (by_stamps ? ": newest-first order detected; read in time-stamp order"
                                         : ": newest-first order detected; read back to front"));
    } else {
      notes->push_back(name + ": looks newest-first, but it is too large to re-read from stdin; "
                              "pass it as a file");
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace

StatusOr<Diagnosis> DiagnoseFiles(const std::vector<std::string>& paths_in,
                                  const DiagnoseOptions& options) {
  std::vector<std::string> paths = paths_in;
  if (paths.empty()) paths.push_back("-");
  std::vector<AnalysisResult> results;
  std::vector<std::string> names;
  ReadStats stats;
  bool any_reversed = false;
  std::vector<std::string> notes;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    const bool is_stdin = path == "-";
    std::string name = is_stdin ? "<stdin>" : path;
    std::string default_process = paths.size() > 1 ? BaseName(name) : std::string();
    int fd = is_stdin ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      Status st = ErrnoError("diagnose: cannot open log '" + path + "'", err);
      return err == ENOENT ? NotFoundError(st.message()) : st;
    }
    struct stat st;
    const bool have_stat = ::fstat(fd, &st) == 0;
    const bool seekable = have_stat && S_ISREG(st.st_mode);
    if (have_stat && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return InvalidArgumentError("diagnose: '" + path + "' is a directory, expected a log file");
    }
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> spool(nullptr, &std::fclose);
    if (!seekable && options.detect_reversed) spool.reset(std::tmpfile());
    AnalysisResult r;
    bool reversed = false;
    Status s = AnalyzeFd(fd, seekable, name, static_cast<int>(i), default_process, options,
                         spool.get(), &r, &stats, &reversed, &notes);
    if (!is_stdin) ::close(fd);
    if (!s.ok()) return s;
    any_reversed = any_reversed || reversed;
    results.push_back(std::move(r));
    names.push_back(std::move(name));
  }
  Diagnosis d = Combine(std::move(results), std::move(names));
  d.stats = stats;
  d.reversed = any_reversed;
  for (std::string& n : notes) d.notes.push_back(std::move(n));
  if (stats.binary_lines > 0) {
    d.notes.push_back(std::to_string(stats.binary_lines) + " binary line(s) skipped");
  }
  return d;
}

Diagnosis DiagnoseText(std::string_view text, std::string name, const DiagnoseOptions& options) {
  // Split once, apply the readers' rules (cap, CR, binary), analyze forward and,
  // when it looks reversed, backward.
  std::vector<std::pair<std::string_view, uint64_t>> lines;
  ReadStats stats;
  stats.bytes = text.size();
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view l = text.substr(start, end - start);
    ++stats.lines;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.size() > options.max_line_bytes) {
      l = l.substr(0, options.max_line_bytes);
      ++stats.truncated_lines;
    }
    if (IsBinaryLine(l)) {
      ++stats.binary_lines;
    } else {
      lines.emplace_back(l, stats.lines);
    }
    start = end + 1;
  }
  Analyzer forward(0, "");
  for (const auto& [l, no] : lines) forward.AddLine(l, no);
  AnalysisResult r = forward.Finish();
  bool reversed = false;
  if (options.detect_reversed && ReadAgainBackward(r)) {
    Analyzer backward(0, "");
    auto it = lines.rbegin();
    AnalyzeBackward(
        r,
        [&](std::string_view* l, uint64_t* n) {
          if (it == lines.rend()) return false;
          *l = it->first;
          *n = it->second;
          ++it;
          return true;
        },
        &backward);
    r = backward.Finish();
    reversed = true;
  }
  std::vector<AnalysisResult> results;
  results.push_back(std::move(r));
  Diagnosis d = Combine(std::move(results), {std::move(name)});
  d.stats = stats;
  d.reversed = reversed;
  return d;
}

}  // namespace specd::diagnose
