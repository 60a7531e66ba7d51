#include "diagnose/line_prefix.h"

#include <cstdint>
#include <cstring>
#include <utility>

namespace specd::diagnose {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAlnum(char c) { return IsDigit(c) || IsAlpha(c); }

// Reads exactly `n` digits at s[i..]; false when they are not all digits.
bool Digits(std::string_view s, size_t i, size_t n, int* v) {
  if (i + n > s.size()) return false;
  int x = 0;
  for (size_t k = 0; k < n; ++k) {
    char c = s[i + k];
    if (!IsDigit(c)) return false;
    x = x * 10 + (c - '0');
  }
  *v = x;
  return true;
}

// Days from 1970-01-01 (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "HH:MM:SS[.,frac]" at s[i..]; returns bytes consumed or 0.
size_t ParseClock(std::string_view s, size_t i, double* seconds) {
  int h, m, sec;
  if (!Digits(s, i, 2, &h) || i + 2 >= s.size() || s[i + 2] != ':' || !Digits(s, i + 3, 2, &m) ||
      i + 5 >= s.size() || s[i + 5] != ':' || !Digits(s, i + 6, 2, &sec)) {
    return 0;
  }
  size_t j = i + 8;
  double frac = 0, scale = 0.1;
  if (j < s.size() && (s[j] == '.' || s[j] == ',') && j + 1 < s.size() && IsDigit(s[j + 1])) {
    ++j;
    while (j < s.size() && IsDigit(s[j])) {
      frac += (s[j] - '0') * scale;
      scale *= 0.1;
      ++j;
    }
  }
  *seconds = h * 3600.0 + m * 60.0 + sec + frac;
  return j - i;
}

Level ParseLevelWord(std::string_view s, size_t* len, bool* specd_word) {
  struct W {
    const char* w;
    Level l;
    bool specd;
  };
  static const W kWords[] = {
      {"ERROR", Level::kError, true},    {"INFO", Level::kInfo, true},
      {"WARNING", Level::kWarn, false},  {"WARN", Level::kWarn, true},
      {"DEBUG", Level::kDebug, true},    {"CRITICAL", Level::kCritical, false},
      {"FATAL", Level::kCritical, false}};
  for (const W& w : kWords) {
    size_t n = std::strlen(w.w);
    if (s.size() >= n && s.compare(0, n, w.w) == 0 && (s.size() == n || !IsAlnum(s[n]))) {
      *len = n;
      *specd_word = w.specd;
      return w.l;
    }
  }
  *len = 0;
  return Level::kNone;
}

// One space after a prefix (never more: indentation belongs to the content).
size_t OneSpace(std::string_view s, size_t i) { return i < s.size() && s[i] == ' ' ? i + 1 : i; }

// Records a stamp unless an outer one was found: a collector stamps every
// line with one clock, while the processes' own stamps may be naive local time.
void SetStamp(LinePrefix* out, double seconds) {
  if (out->has_ts) return;
  out->ts = seconds;
  out->has_ts = true;
}

void AddLabel(LinePrefix* out, std::string_view label) {
  // "[rank0]:[E1202 ...] [Rank 0] msg": the same label again is not a new level.
  std::string_view have = out->label;
  size_t slash = have.rfind('/');
  if ((slash == std::string_view::npos ? have : have.substr(slash + 1)) == label) return;
  if (!out->label.empty()) out->label += '/';
  out->label.append(label.data(), label.size());
}

// Number after `key` inside `s` ("rank=2" -> 2), or -1.
int NumberAfter(std::string_view s, std::string_view key) {
  size_t p = s.find(key);
  if (p == std::string_view::npos) return -1;
  size_t i = p + key.size();
  while (i < s.size() && (s[i] == ' ' || s[i] == '=' || s[i] == ':')) ++i;
  if (i >= s.size() || !IsDigit(s[i])) return -1;
  int v = 0;
  while (i < s.size() && IsDigit(s[i]) && v < 100000000) v = v * 10 + (s[i++] - '0');
  return v;
}

// ISO time stamp, then CRI stream/tag, then an optional level word with
// specd's "rank=N [stage]" or python's "LEVEL:" forms.
size_t TryIso(std::string_view s, LinePrefix* out) {
  double t;
  size_t n = ParseIsoTimestamp(s, &t);
  if (n == 0) return 0;
  bool zulu = s[n - 1] == 'Z';
  SetStamp(out, t);
  size_t i = n;
  if (i < s.size() && s[i] != ' ') return i;  // stamp glued to something: keep the rest
  i = OneSpace(s, i);
  // A zone word, as console exports print it ("2026-12-02 10:40:27.101 UTC"),
  // then their column gap of up to two spaces.
  if (s.compare(i, 4, "UTC ") == 0 || s.compare(i, 4, "GMT ") == 0) i = OneSpace(s, OneSpace(s, i + 3));
  // CRI (Kubernetes) "stderr F " / "stdout P ".
  if (s.compare(i, 7, "stderr ") == 0 || s.compare(i, 7, "stdout ") == 0) {
    if (i + 8 < s.size() && (s[i + 7] == 'F' || s[i + 7] == 'P') && s[i + 8] == ' ') i += 9;
  }
  size_t j = i;
  if (s.compare(j, 2, "| ") == 0) j += 2;  // loguru "| ERROR    | "
  if (s.compare(j, 2, "- ") == 0) j += 2;
  size_t len;
  bool specd_word;
  Level l = ParseLevelWord(s.substr(j), &len, &specd_word);
  if (l == Level::kNone) return i;
  // A level-first stamp of its own ("INFO 12-02 10:40:30 [f.py:1] " under a
  // console's stamp): left whole for TryLevelFirst.
  int mm, dd;
  if (const size_t k = OneSpace(s, j + len);
      Digits(s, k, 2, &mm) && k + 5 < s.size() && s[k + 2] == '-' && Digits(s, k + 3, 2, &dd) &&
      s[k + 5] == ' ')
    return i;
  out->level = l;
  j += len;
  if (j < s.size() && s[j] == ':') ++j;
  while (j < s.size() && s[j] == ' ') ++j;
  if (s.compare(j, 2, "| ") == 0 || s.compare(j, 2, "- ") == 0) j += 2;
  if (zulu && specd_word) {
    out->specd = true;
    if (s.compare(j, 5, "rank=") == 0) {
      size_t k = j + 5;
      int r = 0;
      bool any = false;
      while (k < s.size() && IsDigit(s[k]) && r < 100000000) {
        r = r * 10 + (s[k++] - '0');
        any = true;
      }
      if (any) {
        out->rank = r;
        AddLabel(out, "rank" + std::to_string(r));
        j = OneSpace(s, k);
      }
    }
    if (j < s.size() && s[j] == '[') {
      size_t close = s.find(']', j);
      if (close != std::string_view::npos && close - j < 128) {
        out->stage = s.substr(j + 1, close - j - 1);
        j = OneSpace(s, close + 1);
      }
    }
  }
  return j;
}

// Cloud Logging severities that are not Python levels, as a console export
// prints them before each line's ISO stamp ("DEFAULT 2025-04-07T19:13:52.541Z ").
// DEFAULT (plain text without a severity) says nothing about the line.
size_t TryCloudSeverity(std::string_view s, LinePrefix* out) {
  static constexpr std::pair<std::string_view, Level> kSeverities[] = {
      {"DEFAULT ", Level::kNone},
      {"NOTICE ", Level::kInfo},
      {"ALERT ", Level::kCritical},
      {"EMERGENCY ", Level::kCritical}};
  for (const auto& [word, level] : kSeverities) {
    double t;
    if (s.substr(0, word.size()) == word && ParseIsoTimestamp(s.substr(word.size()), &t) > 0) {
      out->level = level;
      return word.size();
    }
  }
  return 0;
}

// vLLM "ERROR 12-02 10:40:27 [engine.py:123] " / "INFO 12-02 10:40:27 engine.py:12] ",
// uvicorn "ERROR:    ", python basicConfig "ERROR:root:", bare "WARNING  ".
size_t TryLevelFirst(std::string_view s, LinePrefix* out) {
  size_t len;
  bool specd_word;
  Level l = ParseLevelWord(s, &len, &specd_word);
  if (l == Level::kNone) return TryCloudSeverity(s, out);
  size_t i = len;
  int mo, d;
  if (i < s.size() && s[i] == ' ' && Digits(s, i + 1, 2, &mo) && i + 3 < s.size() &&
      s[i + 3] == '-' && Digits(s, i + 4, 2, &d) && i + 6 < s.size() && s[i + 6] == ' ') {
    double clock;
    size_t c = ParseClock(s, i + 7, &clock);
    if (c == 0) return 0;
    out->level = l;
    SetStamp(out, DaysFromCivil(2000, mo, d) * 86400.0 + clock);
    size_t j = OneSpace(s, i + 7 + c);
    // "[file.py:123] " or "file.py:123] ": a token without spaces ending in ']'.
    size_t k = j;
    while (k < s.size() && k - j < 96 && s[k] != ' ' && s[k] != ']') ++k;
    if (k < s.size() && s[k] == ']' && k > j) j = OneSpace(s, k + 1);
    return j;
  }
  if (i < s.size() && s[i] == ' ') {  // "WARNING  message"
    out->level = l;
    while (i < s.size() && s[i] == ' ') ++i;
    return i;
  }
  if (i < s.size() && s[i] == ':') {
    out->level = l;
    size_t j = i + 1;
    if (j < s.size() && s[j] != ' ') {  // "ERROR:root:msg"
      size_t colon = s.find(':', j);
      if (colon != std::string_view::npos && colon - j < 64 &&
          s.substr(j, colon - j).find(' ') == std::string_view::npos) {
        return colon + 1;
      }
      return j;
    }
    while (j < s.size() && s[j] == ' ') ++j;
    return j;
  }
  return 0;
}

// glog: "E1202 10:40:27.123456  1234 file.cc:123] " (also inside brackets).
size_t TryGlog(std::string_view s, LinePrefix* out) {
  if (s.size() < 16 || (s[0] != 'I' && s[0] != 'W' && s[0] != 'E' && s[0] != 'F')) return 0;
  int mo, d;
  if (!Digits(s, 1, 2, &mo) || !Digits(s, 3, 2, &d) || s[5] != ' ') return 0;
  double clock;
  size_t c = ParseClock(s, 6, &clock);
  if (c == 0) return 0;
  size_t close = s.find("] ", 6 + c);
  if (close == std::string_view::npos || close > 160) {
    close = s.find(']', 6 + c);
    if (close == std::string_view::npos || close > 160) return 0;
  }
  out->level = s[0] == 'I' ? Level::kInfo : s[0] == 'W' ? Level::kWarn
             : s[0] == 'E' ? Level::kError : Level::kCritical;
  SetStamp(out, DaysFromCivil(2000, mo, d) * 86400.0 + clock);
  return OneSpace(s, close + 1);
}

// Labels such as "TP3", "PP0 TP3", "DP1 TP2 EP2": upper-case letters then digits.
bool ParseParallelLabel(std::string_view inner, int* rank) {
  if (inner.empty()) return false;
  size_t i = 0;
  int tp = -1, last = -1;
  while (i < inner.size()) {
    size_t a = i;
    while (i < inner.size() && IsUpper(inner[i])) ++i;
    if (i - a < 2 || i - a > 3) return false;
    size_t b = i;
    int v = 0;
    while (i < inner.size() && IsDigit(inner[i])) v = v * 10 + (inner[i++] - '0');
    if (i == b) return false;
    if (inner.substr(a, b - a) == "TP") tp = v;
    last = v;
    if (i < inner.size()) {
      if (inner[i] != ' ') return false;
      ++i;
    }
  }
  *rank = tp >= 0 ? tp : last;
  return true;
}

size_t TryBracket(std::string_view s, LinePrefix* out) {
  if (s.empty() || s[0] != '[') return 0;
  size_t close = s.find(']');
  if (close == std::string_view::npos || close > 96) return 0;
  std::string_view inner = s.substr(1, close - 1);
  bool matched = false;
  int rank = -1;
  double t;
  if (size_t n = ParseIsoTimestamp(inner, &t); n > 0) {
    SetStamp(out, t);
    matched = true;
    std::string_view rest = inner.substr(n);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.empty() && ParseParallelLabel(rest, &rank)) AddLabel(out, rest);
  } else if (ParseParallelLabel(inner, &rank)) {
    AddLabel(out, inner);
    matched = true;
  } else if (inner.size() >= 5 && (inner.compare(0, 4, "rank") == 0 || inner.compare(0, 4, "Rank") == 0 ||
                                   inner.compare(0, 4, "RANK") == 0)) {
    rank = NumberAfter(inner, inner.substr(0, 4));
    if (rank < 0) return 0;
    AddLabel(out, "rank" + std::to_string(rank));
    matched = true;
  } else if (inner.size() > 7 && inner.compare(0, 7, "default") == 0 && IsDigit(inner[7])) {
    rank = NumberAfter(inner, "default");
    AddLabel(out, inner);
    matched = true;
  } else if (size_t comma = inner.find(','); comma != std::string_view::npos && comma > 0 &&
                                             comma + 1 < inner.size()) {
    // Open MPI --tag-output: "[jobid,rank]<stderr>:"
    bool digits = true;
    for (char c : inner) digits = digits && (IsDigit(c) || c == ',');
    if (!digits) return 0;
    rank = NumberAfter(inner, ",");
    AddLabel(out, "rank" + std::to_string(rank));
    matched = true;
  } else {
    LinePrefix tmp;
    if (TryGlog(inner.size() + 2 <= s.size() ? s.substr(1) : inner, &tmp) > 0) {
      out->level = tmp.level;
      SetStamp(out, tmp.ts);
      matched = true;
    }
  }
  if (!matched) return 0;
  if (rank >= 0) out->rank = rank;
  size_t i = close + 1;
  if (s.compare(i, 8, "<stderr>") == 0 || s.compare(i, 8, "<stdout>") == 0) i += 8;
  if (i < s.size() && s[i] == ':') ++i;
  return OneSpace(s, i);
}

// "(RayWorker pid=123) ", "(VllmWorker rank=2 pid=9) ", "(RayWorkerWrapper pid=5, ip=10.0.0.2) ".
size_t TryParen(std::string_view s, LinePrefix* out) {
  if (s.empty() || s[0] != '(') return 0;
  size_t close = s.find(')');
  if (close == std::string_view::npos || close > 96) return 0;
  std::string_view inner = s.substr(1, close - 1);
  if (inner.find("pid=") == std::string_view::npos && inner.find("rank=") == std::string_view::npos) {
    return 0;
  }
  size_t ip = inner.find(", ip=");
  AddLabel(out, ip == std::string_view::npos ? inner : inner.substr(0, ip));
  int r = NumberAfter(inner, "rank=");
  if (r >= 0) out->rank = r;
  return OneSpace(s, close + 1);
}

// docker compose: "vllm-1  | ".
size_t TryContainer(std::string_view s, LinePrefix* out) {
  size_t i = 0;
  while (i < s.size() && i < 64 && (IsAlnum(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.')) ++i;
  if (i == 0 || i >= s.size() || s[i] != ' ') return 0;
  size_t j = i;
  while (j < s.size() && s[j] == ' ') ++j;
  if (j >= s.size() || s[j] != '|') return 0;
  AddLabel(out, s.substr(0, i));
  return OneSpace(s, j + 1);
}

// "Dec  2 10:40:27 host prog[123]: " (the tag becomes the label unless it is the kernel).
size_t TrySyslog(std::string_view s, LinePrefix* out) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (s.size() < 16 || s[3] != ' ') return 0;
  int month = 0;
  for (int m = 0; m < 12; ++m) {
    if (s.compare(0, 3, kMonths[m]) == 0) month = m + 1;
  }
  if (month == 0) return 0;
  size_t i = 4;
  if (s[i] == ' ') ++i;
  int day = 0;
  while (i < s.size() && IsDigit(s[i])) day = day * 10 + (s[i++] - '0');
  if (day == 0 || i >= s.size() || s[i] != ' ') return 0;
  double clock;
  size_t c = ParseClock(s, i + 1, &clock);
  if (c == 0) return 0;
  SetStamp(out, DaysFromCivil(2000, month, day) * 86400.0 + clock);
  i = i + 1 + c;
  // " host tag[pid]: "
  size_t host_end = s.find(' ', i + 1);
  if (i >= s.size() || s[i] != ' ' || host_end == std::string_view::npos) return OneSpace(s, i);
  size_t colon = s.find(": ", host_end + 1);
  if (colon == std::string_view::npos || colon - host_end > 64) return OneSpace(s, i);
  std::string_view tag = s.substr(host_end + 1, colon - host_end - 1);
  if (tag.find(' ') != std::string_view::npos) return OneSpace(s, i);
  if (tag.compare(0, 6, "kernel") != 0) AddLabel(out, tag);
  return colon + 2;
}

}  // namespace

size_t ParseIsoTimestamp(std::string_view s, double* seconds) {
  int y, mo, d;
  if (!Digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != ' ')) {
    return 0;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31) return 0;
  double clock;
  size_t c = ParseClock(s, 11, &clock);
  if (c == 0) return 0;
  size_t i = 11 + c;
  if (i < s.size() && s[i] == 'Z') {
    ++i;
  } else if (i + 5 < s.size() + 0 && (s[i] == '+' || s[i] == '-') && IsDigit(s[i + 1])) {
    int hh, mm;
    if (Digits(s, i + 1, 2, &hh)) {
      size_t k = i + 3;
      if (k < s.size() && s[k] == ':') ++k;
      if (Digits(s, k, 2, &mm)) {
        double off = hh * 3600.0 + mm * 60.0;
        clock += s[i] == '+' ? -off : off;  // normalise to UTC
        i = k + 2;
      }
    }
  }
  (void)y;  // see the header: the year is dropped
  *seconds = DaysFromCivil(2000, mo, d) * 86400.0 + clock;
  return i;
}

namespace {

// The prefixes at the start of `line`, in any order and nesting.
void ParsePrefixes(std::string_view line, LinePrefix* out) {
  out->label.clear();
  out->rank = -1;
  out->ts = 0;
  out->has_ts = false;
  out->level = Level::kNone;
  out->stage = {};
  out->specd = false;
  size_t pos = 0;
  for (int iter = 0; iter < 8 && pos < line.size(); ++iter) {
    std::string_view s = line.substr(pos);
    char c = s[0];
    size_t n = 0;
    if (c == '[') {
      n = TryBracket(s, out);
    } else if (c == '(') {
      n = TryParen(s, out);
    } else if (IsDigit(c)) {
      n = TryIso(s, out);
      if (n == 0) n = TryContainer(s, out);
    } else if (IsUpper(c)) {
      n = TryLevelFirst(s, out);
      if (n == 0) n = TryGlog(s, out);
      if (n == 0) n = TrySyslog(s, out);
      if (n == 0 && iter == 0) n = TryContainer(s, out);
    } else if (IsAlpha(c) && iter == 0) {
      n = TryContainer(s, out);
    }
    if (n == 0) break;
    pos += n;
  }
  out->content = line.substr(pos);
}

// A CSV field: "a ""b"" c" -> a "b" c (an unterminated field keeps the rest).
void Unquote(std::string_view field, std::string* out) {
  out->clear();
  for (size_t i = 1; i < field.size(); ++i) {
    if (field[i] == '"') {
      if (i + 1 < field.size() && field[i + 1] == '"') {
        out->push_back('"');
        ++i;
        continue;
      }
      break;
    }
    out->push_back(field[i]);
  }
}

}  // namespace

void ParseLinePrefix(std::string_view line, LinePrefix* out) {
  // CSV exports (CloudWatch, BigQuery): "<stamp>,<message>", the message
  // quoted when it holds a comma or a quote.
  double t;
  const size_t n = IsDigit(line.empty() ? ' ' : line[0]) ? ParseIsoTimestamp(line, &t) : 0;
  if (n > 0 && n < line.size() && line[n] == ',') {
    std::string_view field = line.substr(n + 1);
    if (!field.empty() && field.front() == '"') {
      Unquote(field, &out->csv_field);
      field = out->csv_field;
    }
    ParsePrefixes(field, out);
    out->ts = t;  // the export's stamp is the outermost one
    out->has_ts = true;
    return;
  }
  ParsePrefixes(line, out);
}

}  // namespace specd::diagnose
