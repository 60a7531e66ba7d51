// Bounded-memory line readers for logs of any size.
//
// Lines are returned without the trailing "\n" / "\r\n" and cut at
// `max_line_bytes` (the rest of an over-long line is skipped, not buffered), so
// memory stays at one read buffer plus one capped line whatever the input.
// Binary lines (a NUL byte, or many control bytes near the start) are skipped
// and counted, so garbage never reaches the parser or the report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace specd::diagnose {

struct ReadStats {
  uint64_t bytes = 0;           // bytes read
  uint64_t lines = 0;           // lines seen, including skipped ones
  uint64_t binary_lines = 0;    // skipped as binary
  uint64_t truncated_lines = 0; // longer than max_line_bytes
};

// True when `line` looks like binary data rather than text.
bool IsBinaryLine(std::string_view line);

class LineReader {
 public:
  virtual ~LineReader() = default;
  // Returns the next text line and its 1-based line number in the file, or
  // false at end of input (check status() afterwards for a read error).
  virtual bool Next(std::string_view* line, uint64_t* line_no) = 0;
  virtual const Status& status() const = 0;
  virtual const ReadStats& stats() const = 0;
};

// Reads `fd` front to back. When `spool` is non-null, every byte read is also
// appended to it (up to `spool_limit` bytes; spool_complete() says whether all
// of it fit), so a non-seekable input such as stdin can be read again.
// Does not own `fd` or `spool`.
std::unique_ptr<LineReader> NewForwardLineReader(int fd, std::string name, size_t max_line_bytes,
                                                 std::FILE* spool = nullptr,
                                                 uint64_t spool_limit = 0);

// Reads a seekable `fd` back to front: the last line first. `total_lines` is
// the number of lines a forward read counted, so line numbers stay those of
// the file. Does not own `fd`.
std::unique_ptr<LineReader> NewBackwardLineReader(int fd, std::string name, uint64_t total_lines,
                                                  size_t max_line_bytes);

// For forward readers created with a spool: whether every byte fit.
bool SpoolComplete(const LineReader& reader);

}  // namespace specd::diagnose
