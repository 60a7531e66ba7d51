#include "tokenizer/utf8.h"

#include <array>

namespace specd::tok {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Well-formedness per Unicode Table 3-7: the second byte's range depends on
// the lead byte (no overlongs, no surrogates, nothing above U+10FFFF).
Utf8Check CheckUtf8At(std::string_view s, size_t* len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t c = p[0];
  *len = 1;
  if (c < 0x80) return Utf8Check::kValid;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return Utf8Check::kInvalid;
  }
  for (size_t i = 1; i < n; ++i) {
    if (i >= s.size()) return Utf8Check::kIncomplete;
    const uint8_t b = p[i];
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return Utf8Check::kInvalid;
  }
  *len = n;
  return Utf8Check::kValid;
}

size_t AppendValidUtf8(std::string_view s, bool hold_tail, std::string* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    switch (CheckUtf8At(s.substr(i), &len)) {
      case Utf8Check::kValid:
        out->append(s.data() + i, len);
        i += len;
        break;
      case Utf8Check::kIncomplete:
        if (hold_tail) return i;
        [[fallthrough]];
      case Utf8Check::kInvalid:
        out->append("\xEF\xBF\xBD");
        i += 1;
        break;
    }
  }
  return i;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (CheckUtf8At(s.substr(i), &len) != Utf8Check::kValid) return false;
    i += len;
  }
  return true;
}

namespace {

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // every image lies below U+0200
  ByteMap() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& GetByteMap() {
  static const ByteMap map;
  return map;
}

}  // namespace

uint32_t ByteToUnicode(uint8_t b) { return GetByteMap().to_cp[b]; }

int UnicodeToByte(uint32_t cp) { return cp < 512 ? GetByteMap().to_byte[cp] : -1; }

bool ByteLevelToBytes(std::string_view piece, std::string* out) {
  out->clear();
  const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
  size_t i = 0;
  while (i < piece.size()) {
    uint32_t cp;
    if (p[i] < 0x80) {
      cp = p[i];
      i += 1;
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < piece.size()) {
      cp = ((p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F);
      i += 2;
    } else {
      return false;  // every image of the byte map is at most 2 bytes long
    }
    const int b = UnicodeToByte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

int ParseByteToken(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace specd::tok
