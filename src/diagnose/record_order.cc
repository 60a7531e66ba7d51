#include "diagnose/record_order.h"

namespace specd::diagnose {

bool StartsRecord(std::string_view line, LinePrefix* scratch) {
  ParseLinePrefix(line, scratch);
  return scratch->content.size() != line.size();
}

bool RecordReverser::Next(std::string_view* line, uint64_t* line_no) {
  while (ready_.empty() && !done_) {
    std::string_view l;
    uint64_t no;
    if (!source_(&l, &no)) {
      done_ = true;
      // Bare lines above the first record: one record of their own.
      for (auto it = bare_.rbegin(); it != bare_.rend(); ++it) ready_.push_back(std::move(*it));
      bare_.clear();
      break;
    }
    if (!StartsRecord(l, &prefix_)) {
      if (bare_.size() == kMaxRecordLines) {
        // Too long to be one record: pass the oldest-read half on as read.
        for (size_t i = 0; i < kMaxRecordLines / 2; ++i) ready_.push_back(std::move(bare_[i]));
        bare_.erase(bare_.begin(), bare_.begin() + kMaxRecordLines / 2);
      }
      bare_.emplace_back(std::string(l), no);
      continue;
    }
    if (bare_.empty()) {
      // A one-line record (the common case): the source's view is valid
      // until our next call, so it is passed on without a copy.
      *line = l;
      *line_no = no;
      return true;
    }
    ready_.emplace_back(std::string(l), no);
    for (auto it = bare_.rbegin(); it != bare_.rend(); ++it) ready_.push_back(std::move(*it));
    bare_.clear();
  }
  if (ready_.empty()) return false;
  current_ = std::move(ready_.front().first);
  *line_no = ready_.front().second;
  ready_.pop_front();
  *line = current_;
  return true;
}

}  // namespace specd::diagnose
