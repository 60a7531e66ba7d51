// Text and JSON renderings of a Diagnosis (declared in diagnose.h).
#include <nlohmann/json.hpp>

#include "diagnose/diagnose.h"

namespace specd::diagnose {
namespace {

using nlohmann::json;

// Control bytes from a damaged log must not reach the terminal.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    out += (c < 0x20 && c != '\t') || c == 0x7f ? '?' : ch;
  }
  return out;
}

std::string SourceName(const Diagnosis& d, int source) {
  return source >= 0 && static_cast<size_t>(source) < d.sources.size() ? d.sources[source]
                                                                        : std::string("<input>");
}

std::string Summary(const Candidate& c) {
  std::string s = c.type.empty() ? c.message : c.type + (c.message.empty() ? "" : ": " + c.message);
  if (!c.stage.empty()) s = "[" + c.stage + "] " + s;
  return s;
}

std::string ProcessText(const Candidate& c) {
  std::string p = c.process.empty() ? "(unlabelled)" : c.process;
  std::string rank = "rank " + std::to_string(c.rank);
  if (c.rank >= 0 && p.find(std::to_string(c.rank)) == std::string::npos) p += " (" + rank + ")";
  return p;
}

json NullIfEmpty(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json FailureJson(const Diagnosis& d, const Candidate& c) {
  json j;
  j["process"] = NullIfEmpty(c.process);
  j["rank"] = c.rank >= 0 ? json(c.rank) : json(nullptr);
  j["type"] = NullIfEmpty(c.type);
  j["summary"] = Summary(c);
  j["signature"] = NullIfEmpty(c.signature);
  j["file"] = SourceName(d, c.source);
  j["line"] = c.line;
  if (!c.missing_ranks.empty()) j["missing_ranks"] = c.missing_ranks;
  return j;
}

}  // namespace

std::string FormatDiagnosisText(const Diagnosis& d) {
  std::string o;
  if (!d.found) {
    o += "no failure found";
    o += " (" + std::to_string(d.stats.lines) + " lines";
    if (d.stats.binary_lines > 0) o += ", " + std::to_string(d.stats.binary_lines) + " binary skipped";
    o += ")\n";
    for (const std::string& n : d.notes) o += "note: " + Printable(n) + "\n";
    return o;
  }
  const Candidate& c = d.cause;
  o += d.cause_is_consequence ? "root cause (only consequences seen): " : "root cause: ";
  o += Printable(Summary(c).substr(0, 600)) + "\n";
  o += "  process:   " + Printable(ProcessText(c));
  if (d.same_way_count > 1) {
    o += "; " + std::to_string(d.same_way_count) + " processes failed the same way";
  }
  o += "\n";
  if (!c.stage.empty()) o += "  stage:     " + Printable(c.stage) + "\n";
  if (c.has_frame) {
    o += "  raised at: " + Printable(c.frame.file) + ":" + std::to_string(c.frame.line);
    if (!c.frame.function.empty()) o += " in " + Printable(c.frame.function);
    o += "\n";
    if (!c.frame.code.empty()) o += "             " + Printable(c.frame.code) + "\n";
  }
  if (c.truncated) o += "  note:      the traceback is cut off; this is what is known\n";
  if (c.chain.size() > 1) {
    o += "  chain:     ";
    for (size_t i = 0; i < c.chain.size(); ++i) {
      if (i > 0) o += "\n          -> ";
      o += Printable(c.chain[i]);
    }
    o += "\n";
  }
  if (!d.signature.empty()) o += "  signature: " + d.signature + " (" + d.signature_title + ")\n";
  if (!d.hint.empty()) o += "  hint:      " + Printable(d.hint) + "\n";
  if (!d.missing_ranks.empty()) {
    o += "  missing:   rank(s)";
    for (int r : d.missing_ranks) o += " " + std::to_string(r);
    o += " never arrived (per the log)\n";
  }
  o += "evidence:\n";
  for (const Evidence& e : c.evidence) {
    o += "  " + Printable(SourceName(d, e.source)) + ":" + std::to_string(e.line) + ": " +
         Printable(e.text) + "\n";
  }
  if (d.consequences_total > 0) {
    o += "consequences (" + std::to_string(d.consequences_total) + "):\n";
    for (const Candidate& k : d.consequences) {
      o += "  " + Printable(ProcessText(k)) + ": " + Printable(Summary(k)).substr(0, 200) + "  (" +
           Printable(SourceName(d, k.source)) + ":" + std::to_string(k.line) + ")\n";
    }
    if (d.consequences_total > d.consequences.size()) {
      o += "  ... " + std::to_string(d.consequences_total - d.consequences.size()) + " more\n";
    }
  }
  if (d.other_failures_total > 0) {
    o += "other failures (" + std::to_string(d.other_failures_total) + "):\n";
    for (const Candidate& k : d.other_failures) {
      o += "  " + Printable(ProcessText(k)) + ": " + Printable(Summary(k)).substr(0, 200) + "  (" +
           Printable(SourceName(d, k.source)) + ":" + std::to_string(k.line) + ")\n";
    }
  }
  for (const std::string& n : d.notes) o += "note: " + Printable(n) + "\n";
  return o;
}

std::string FormatDiagnosisJson(const Diagnosis& d) {
  json j;
  j["found"] = d.found;
  json input;
  input["files"] = d.sources;
  input["bytes"] = d.stats.bytes;
  input["lines"] = d.stats.lines;
  input["binary_lines_skipped"] = d.stats.binary_lines;
  input["truncated_lines"] = d.stats.truncated_lines;
  input["reversed"] = d.reversed;
  input["streams"] = d.streams;
  input["logging_noise_blocks"] = d.noise_blocks;
  if (!d.found) {
    j["cause"] = nullptr;
    j["signature"] = nullptr;
    j["hint"] = nullptr;
    j["evidence"] = json::array();
    j["consequences"] = json::array();
    j["message"] = "no failure found";
    j["input"] = input;
    j["notes"] = d.notes;
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  const Candidate& c = d.cause;
  json cause;
  cause["type"] = NullIfEmpty(c.type);
  cause["message"] = c.message;
  cause["details"] = NullIfEmpty(c.details);
  cause["process"] = NullIfEmpty(c.process);
  cause["rank"] = c.rank >= 0 ? json(c.rank) : json(nullptr);
  cause["stage"] = NullIfEmpty(c.stage);
  cause["file"] = c.has_frame ? json(c.frame.file) : json(nullptr);
  cause["line"] = c.has_frame ? json(c.frame.line) : json(nullptr);
  cause["function"] = c.has_frame ? NullIfEmpty(c.frame.function) : json(nullptr);
  cause["code"] = c.has_frame ? NullIfEmpty(c.frame.code) : json(nullptr);
  cause["log_file"] = SourceName(d, c.source);
  cause["log_line"] = c.line;
  cause["truncated"] = c.truncated;
  cause["is_consequence"] = d.cause_is_consequence;
  cause["chain"] = c.chain;
  j["cause"] = cause;
  j["signature"] = NullIfEmpty(d.signature);
  j["signature_title"] = NullIfEmpty(d.signature_title);
  j["hint"] = NullIfEmpty(d.hint);
  j["ranks_failed_same_way"] = d.same_way_count;
  j["processes_failed_same_way"] = d.same_way_processes;
  j["missing_ranks"] = d.missing_ranks;
  json ev = json::array();
  for (const Evidence& e : c.evidence) {
    ev.push_back({{"file", SourceName(d, e.source)}, {"line", e.line}, {"text", e.text}});
  }
  j["evidence"] = ev;
  json cons = json::array();
  for (const Candidate& k : d.consequences) cons.push_back(FailureJson(d, k));
  j["consequences"] = cons;
  j["consequences_total"] = d.consequences_total;
  json other = json::array();
  for (const Candidate& k : d.other_failures) other.push_back(FailureJson(d, k));
  j["other_failures"] = other;
  j["other_failures_total"] = d.other_failures_total;
  j["input"] = input;
  j["notes"] = d.notes;
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace specd::diagnose
