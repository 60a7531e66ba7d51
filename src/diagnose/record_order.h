// Newest-first logs (as cloud logging consoles export them) read back in
// time order, record by record.
//
// A record is a line that starts with something a collector put there (a time
// stamp, a level, a process label: see line_prefix.h) together with the bare
// lines below it (its continuation lines, e.g. the frames of a traceback the
// process logged as one message). A newest-first export lists records newest
// first but keeps each record's lines in their order, so reading the file
// backward line by line would turn every multi-line record upside down.
// RecordReverser takes the lines last to first and yields every record's
// lines in file order, the last record first.
//
// Memory: at most kMaxRecordLines buffered continuation lines; a longer run of
// bare lines is passed on last to first, as a plain backward read would.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "diagnose/line_prefix.h"

namespace specd::diagnose {

// True when ParseLinePrefix found a prefix at the start of `line`.
bool StartsRecord(std::string_view line, LinePrefix* scratch);

class RecordReverser {
 public:
  static constexpr size_t kMaxRecordLines = 4096;
  // `source` yields the input's lines last to first (a backward line reader),
  // returning false at the end; the views it returns may die at its next call.
  using Source = std::function<bool(std::string_view*, uint64_t*)>;
  explicit RecordReverser(Source source) : source_(std::move(source)) {}

  // The next line in record order, with its line number; false at the end.
  // The view is valid until the next call.
  bool Next(std::string_view* line, uint64_t* line_no);

 private:
  Source source_;
  LinePrefix prefix_;
  std::vector<std::pair<std::string, uint64_t>> bare_;  // continuation lines, last first
  std::deque<std::pair<std::string, uint64_t>> ready_;  // lines to yield, in order
  std::string current_;
  bool done_ = false;
};

}  // namespace specd::diagnose
