#include "diagnose/record_order.h"

#include <iterator>

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

void StampOrderer::Insert(Record r) {
  // The window is nearly sorted and `r` is usually its newest record: search
  // from the back.
  const bool before_equals = ties_in_file_order_ && r.stamped;
  auto it = window_.end();
  while (it != window_.begin()) {
    const double before = std::prev(it)->ts;
    if (before < r.ts || (before == r.ts && !before_equals)) break;
    --it;
  }
  window_lines_ += r.lines.size();
  window_.insert(it, std::move(r));
}

bool StampOrderer::Next(std::string_view* line, uint64_t* line_no) {
  while (ready_.empty()) {
    if (!done_ && window_lines_ <= kWindowLines) {
      std::string_view l;
      uint64_t no;
      if (!records_.Next(&l, &no)) {
        done_ = true;
        if (has_open_) Insert(std::move(open_));
        has_open_ = false;
        continue;
      }
      // RecordReverser yields each record's first line, then its bare lines.
      ParseLinePrefix(l, &prefix_);
      const bool starts = prefix_.content.size() != l.size();
      if (!starts && has_open_ && open_.lines.size() < kWindowLines) {
        open_.lines.emplace_back(std::string(l), no);
        continue;
      }
      if (has_open_) Insert(std::move(open_));
      open_ = Record{};
      has_open_ = true;
      open_.stamped = starts && prefix_.has_ts;
      if (open_.stamped) last_ts_ = prefix_.ts;
      open_.ts = last_ts_;
      open_.lines.emplace_back(std::string(l), no);
      continue;
    }
    if (window_.empty()) return false;
    Record& front = window_.front();
    window_lines_ -= front.lines.size();
    for (auto& p : front.lines) ready_.push_back(std::move(p));
    window_.pop_front();
  }
  current_ = std::move(ready_.front().first);
  *line_no = ready_.front().second;
  ready_.pop_front();
  *line = current_;
  return true;
}

}  // namespace specd::diagnose
