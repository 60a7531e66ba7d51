#include "tokenizer/pipeline.h"

#include <utf8proc.h>

#include <cstdlib>
#include <utility>

#include "tokenizer/utf8.h"

namespace specd::tok {

const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

// Unicode normalization through utf8proc; text that is not valid UTF-8 is
// left unchanged (utf8proc rejects it), as no normal form is defined for it.
void UnicodeNormalize(Normalizer::Kind kind, std::string* text) {
  int options = UTF8PROC_STABLE;
  switch (kind) {
    case Normalizer::Kind::kNfc: options |= UTF8PROC_COMPOSE; break;
    case Normalizer::Kind::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case Normalizer::Kind::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Normalizer::Kind::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    default: return;
  }
  // Pure ASCII is already in every normal form (but not lower case).
  bool ascii = true;
  for (char c : *text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text->data()),
                   static_cast<utf8proc_ssize_t>(text->size()), &out,
                   static_cast<utf8proc_option_t>(options));
  if (n >= 0) text->assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
}

// Lower-cases code point by code point (Rust's str::to_lowercase without its
// context-dependent final-sigma rule).
void Lowercase(std::string* text) {
  std::string out;
  out.reserve(text->size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text->data());
  utf8proc_ssize_t i = 0, n = static_cast<utf8proc_ssize_t>(text->size());
  while (i < n) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &cp);
    if (len <= 0) {  // invalid byte: keep it
      out.push_back(static_cast<char>(p[i]));
      ++i;
      continue;
    }
    AppendUtf8(static_cast<uint32_t>(utf8proc_tolower(cp)), &out);
    i += len;
  }
  *text = std::move(out);
}

void ReplaceAll(const Regex& pattern, const std::string& with, std::string* text) {
  std::string out;
  size_t last = 0;
  bool any = false;
  pattern.FindAll(*text, [&](size_t s, size_t e) {
    out.append(*text, last, s - last);
    out += with;
    last = e;
    any = true;
  });
  if (!any) return;
  out.append(*text, last, std::string::npos);
  *text = std::move(out);
}

bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Splits each piece by `pattern` with Hugging Face's delimiter behaviours
// (tokenizers' SplitDelimiterBehavior, including how runs of delimiters merge).
void Split(const PreTokenizer& step, std::vector<Piece>* pieces) {
  std::vector<Piece> out;
  out.reserve(pieces->size() * 2);
  struct Seg {
    size_t s, e;
    bool delim;
  };
  std::vector<Seg> segs;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (Piece& piece : *pieces) {
    const std::string& t = piece.text;
    segs.clear();
    ranges.clear();
    size_t last = 0;
    step.pattern->FindAll(t, [&](size_t s, size_t e) {
      if (s > last) segs.push_back({last, s, step.invert});
      segs.push_back({s, e, !step.invert});
      last = e;
    });
    if (last < t.size()) segs.push_back({last, t.size(), step.invert});
    for (size_t i = 0; i < segs.size(); ++i) {
      const Seg& g = segs[i];
      const bool prev_delim = i > 0 && segs[i - 1].delim;
      bool extend = false;
      switch (step.behavior) {
        case SplitBehavior::kRemoved:
          if (g.delim) continue;
          break;
        case SplitBehavior::kIsolated:
          break;
        case SplitBehavior::kMergedWithPrevious:
          extend = g.delim && i > 0 && !prev_delim;
          break;
        case SplitBehavior::kMergedWithNext:
          extend = !g.delim && prev_delim;
          break;
        case SplitBehavior::kContiguous:
          extend = g.delim && prev_delim;
          break;
      }
      if (extend) {
        ranges.back().second = g.e;
      } else {
        ranges.emplace_back(g.s, g.e);
      }
    }
    for (size_t r = 0; r < ranges.size(); ++r) {
      const auto [s, e] = ranges[r];
      out.push_back({t.substr(s, e - s), r == 0 && piece.first && s == 0});
    }
  }
  *pieces = std::move(out);
}

void ByteLevel(const PreTokenizer& step, std::vector<Piece>* pieces) {
  if (step.add_prefix_space) {
    for (Piece& p : *pieces) {
      if (p.text.empty() || p.text[0] != ' ') p.text.insert(p.text.begin(), ' ');
    }
  }
  if (step.byte_level_regex) {
    PreTokenizer split;
    split.kind = PreTokenizer::Kind::kSplit;
    split.pattern = step.byte_level_regex;
    split.behavior = SplitBehavior::kIsolated;
    Split(split, pieces);
  }
}

void Metaspace(const PreTokenizer& step, std::vector<Piece>* pieces) {
  const std::string& rep = step.replacement;
  for (Piece& p : *pieces) {
    std::string t;
    t.reserve(p.text.size() + rep.size());
    for (char c : p.text) {
      if (c == ' ') t += rep;
      else t.push_back(c);
    }
    const bool starts = t.compare(0, rep.size(), rep) == 0;
    if (!starts && (step.prepend == PreTokenizer::Prepend::kAlways ||
                    (step.prepend == PreTokenizer::Prepend::kFirst && p.first))) {
      t.insert(0, rep);
    }
    p.text = std::move(t);
  }
  if (!step.split) return;
  // Split before each replacement character (MergedWithNext).
  std::vector<Piece> out;
  for (Piece& p : *pieces) {
    const std::string& t = p.text;
    size_t start = 0;
    bool first = p.first;
    for (size_t pos = t.find(rep, 1); pos != std::string::npos;
         pos = t.find(rep, pos + rep.size())) {
      if (pos > start) {
        out.push_back({t.substr(start, pos - start), first});
        first = false;
        start = pos;
      }
    }
    if (start < t.size()) out.push_back({t.substr(start), first});
  }
  *pieces = std::move(out);
}

}  // namespace

void Normalize(const std::vector<Normalizer>& steps, std::string* text) {
  for (const Normalizer& n : steps) {
    switch (n.kind) {
      case Normalizer::Kind::kPrepend:
        if (!text->empty()) text->insert(0, n.content);
        break;
      case Normalizer::Kind::kReplace:
        ReplaceAll(*n.pattern, n.content, text);
        break;
      case Normalizer::Kind::kStrip: {
        size_t b = 0, e = text->size();
        if (n.strip_left) while (b < e && IsAsciiSpace((*text)[b])) ++b;
        if (n.strip_right) while (e > b && IsAsciiSpace((*text)[e - 1])) --e;
        *text = text->substr(b, e - b);
        break;
      }
      case Normalizer::Kind::kLowercase:
        Lowercase(text);
        break;
      default:
        UnicodeNormalize(n.kind, text);
        break;
    }
  }
}

void PreTokenize(const std::vector<PreTokenizer>& steps, std::string text, bool first,
                 std::vector<Piece>* out) {
  out->clear();
  if (text.empty()) return;
  out->push_back({std::move(text), first});
  for (const PreTokenizer& step : steps) {
    switch (step.kind) {
      case PreTokenizer::Kind::kSplit: Split(step, out); break;
      case PreTokenizer::Kind::kByteLevel: ByteLevel(step, out); break;
      case PreTokenizer::Kind::kMetaspace: Metaspace(step, out); break;
    }
  }
}

}  // namespace specd::tok
