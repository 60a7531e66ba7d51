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
//
// Exports that stamp every line (each line its own record) are not always
// exactly reversed: a console that sorts by the printed millisecond lists the
// lines of one millisecond, e.g. most of a traceback, oldest first among
// newer and older ones. StampOrderer sorts such an export by its stamps.
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

// Yields an export's records sorted by their stamps, oldest first. It reads
// them from a RecordReverser (so roughly oldest first already) and sorts
// within a window of kWindowLines lines; a record more out of place than that
// is passed on late rather than held. Records with equal stamps keep the
// file's order when `ties_in_file_order` (the export sorted by a stamp as
// coarse as it prints), else the reverse (it was newest first throughout). A
// record without a stamp stays after the one read before it. Memory: the
// window plus one record of at most kWindowLines lines.
class StampOrderer {
 public:
  static constexpr size_t kWindowLines = 4096;
  // `source` as for RecordReverser: the input's lines last to first.
  StampOrderer(RecordReverser::Source source, bool ties_in_file_order)
      : records_(std::move(source)), ties_in_file_order_(ties_in_file_order) {}

  // The next line in stamp order, with its line number; false at the end.
  // The view is valid until the next call.
  bool Next(std::string_view* line, uint64_t* line_no);

 private:
  struct Record {
    double ts = 0;
    bool stamped = false;  // else ts is the stamp of the record read before
    std::vector<std::pair<std::string, uint64_t>> lines;  // in file order
  };
  void Insert(Record r);

  RecordReverser records_;
  const bool ties_in_file_order_;
  LinePrefix prefix_;
  std::deque<Record> window_;  // sorted by ts
  size_t window_lines_ = 0;
  Record open_;  // the record being read; its lines may continue
  bool has_open_ = false;
  double last_ts_ = 0;  // of the last record read that had a stamp
  std::deque<std::pair<std::string, uint64_t>> ready_;
  std::string current_;
  bool done_ = false;
};

}  // namespace specd::diagnose
