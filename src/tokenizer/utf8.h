// UTF-8 helpers and GPT-2's byte <-> unicode map, shared by the tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specd::tok {

// Length of the UTF-8 sequence that starts with lead byte `c` (1..4); 1 for
// a byte that cannot start a sequence (so callers always make progress).
inline size_t Utf8SeqLen(uint8_t c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Appends code point `cp` as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

// Result of checking the UTF-8 sequence at the start of `s`.
enum class Utf8Check {
  kValid,       // a complete, well-formed character of `len` bytes
  kIncomplete,  // a well-formed prefix cut off by the end of `s`
  kInvalid,     // the first byte cannot start a well-formed character
};
Utf8Check CheckUtf8At(std::string_view s, size_t* len);

// Copies the complete characters of `s` to `out`, replacing each byte that
// cannot be part of a well-formed character by U+FFFD. If `hold_tail` is
// true, a well-formed but incomplete character at the end is not copied:
// the number of bytes consumed is returned so the caller can keep the rest.
size_t AppendValidUtf8(std::string_view s, bool hold_tail, std::string* out);

// True if every character of `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// GPT-2's reversible byte -> code point map (printable bytes map to
// themselves; the others to U+0100.. so that every byte has a visible
// character).
uint32_t ByteToUnicode(uint8_t b);
// Inverse of ByteToUnicode; -1 for code points outside its image.
int UnicodeToByte(uint32_t cp);
// Maps a byte-level piece ("Ġhello") to raw bytes (" hello"). Returns false,
// leaving *out unspecified, if a character is outside the byte map.
bool ByteLevelToBytes(std::string_view piece, std::string* out);

// Parses "<0xAB>" into 0xAB; -1 if `piece` has another form.
int ParseByteToken(std::string_view piece);

}  // namespace specd::tok
