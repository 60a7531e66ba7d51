#include "diagnose/line_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace specd::diagnose {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

// Reads up to `n` bytes, retrying on EINTR. Returns bytes read, 0 at EOF, -1 on error.
ssize_t ReadSome(int fd, char* p, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

ssize_t PreadAll(int fd, char* p, size_t n, off_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, off + static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

std::string_view StripCr(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

class ForwardReader final : public LineReader {
 public:
  ForwardReader(int fd, std::string name, size_t max_line, std::FILE* spool, uint64_t spool_limit)
      : fd_(fd),
        name_(std::move(name)),
        max_line_(std::max<size_t>(max_line, 16)),
        buf_(std::max(kChunkBytes, 2 * max_line_)),
        spool_(spool),
        spool_limit_(spool_limit) {}

  bool Next(std::string_view* line, uint64_t* line_no) override {
    for (;;) {
      const char* base = buf_.data();
      if (begin_ < end_) {
        const void* nl = std::memchr(base + begin_, '\n', end_ - begin_);
        if (nl != nullptr) {
          size_t at = static_cast<const char*>(nl) - base;
          std::string_view l(base + begin_, at - begin_);
          begin_ = at + 1;
          if (skipping_) {  // tail of an over-long line already returned
            skipping_ = false;
            continue;
          }
          if (Emit(l, line, line_no)) return true;
          continue;
        }
      }
      if (eof_) {
        if (begin_ < end_ && !skipping_) {
          std::string_view l(base + begin_, end_ - begin_);
          begin_ = end_;
          if (Emit(l, line, line_no)) return true;
        }
        begin_ = end_;
        return false;
      }
      if (end_ - begin_ >= max_line_) {
        // No newline within max_line_ bytes: return the head, drop the rest.
        if (!skipping_) {
          long_line_.assign(base + begin_, max_line_);
          skipping_ = true;
          begin_ = end_ = 0;
          if (Emit(long_line_, line, line_no)) return true;
        }
        begin_ = end_ = 0;
      }
      if (!Fill()) return false;
    }
  }
  const Status& status() const override { return status_; }
  const ReadStats& stats() const override { return stats_; }
  bool spool_complete() const { return spool_ok_; }

 private:
  // Counts the line, caps it, drops binary lines; true when `l` is returned.
  bool Emit(std::string_view l, std::string_view* out, uint64_t* line_no) {
    ++stats_.lines;
    l = StripCr(l);
    if (l.size() > max_line_) {
      l = l.substr(0, max_line_);
      ++stats_.truncated_lines;
    } else if (skipping_) {
      ++stats_.truncated_lines;
    }
    if (IsBinaryLine(l)) {
      ++stats_.binary_lines;
      return false;
    }
    *out = l;
    *line_no = stats_.lines;
    return true;
  }

  bool Fill() {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    ssize_t n = ReadSome(fd_, buf_.data() + end_, buf_.size() - end_);
    if (n < 0) {
      status_ = ErrnoError(name_ + ": read failed", errno);
      eof_ = true;
      return true;  // hand out what is buffered, then stop
    }
    if (n == 0) {
      eof_ = true;
      return true;
    }
    stats_.bytes += static_cast<uint64_t>(n);
    if (spool_ != nullptr && spool_ok_) {
      if (spooled_ + static_cast<uint64_t>(n) > spool_limit_ ||
          std::fwrite(buf_.data() + end_, 1, static_cast<size_t>(n), spool_) != static_cast<size_t>(n)) {
        spool_ok_ = false;
      }
      spooled_ += static_cast<uint64_t>(n);
    }
    end_ += static_cast<size_t>(n);
    return true;
  }

  int fd_;
  std::string name_;
  size_t max_line_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  bool skipping_ = false;
  std::string long_line_;
  std::FILE* spool_;
  uint64_t spool_limit_;
  uint64_t spooled_ = 0;
  bool spool_ok_ = true;
  Status status_;
  ReadStats stats_;
};

class BackwardReader final : public LineReader {
 public:
  BackwardReader(int fd, std::string name, uint64_t total_lines, size_t max_line)
      : fd_(fd), name_(std::move(name)), total_lines_(total_lines),
        max_line_(std::max<size_t>(max_line, 16)) {
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      status_ = ErrnoError(name_ + ": stat failed", errno);
      done_ = true;
      return;
    }
    pos_ = static_cast<uint64_t>(st.st_size);
    first_segment_ = true;
  }

  bool Next(std::string_view* line, uint64_t* line_no) override {
    while (!done_) {
      if (cursor_ > 0 || (have_data_ && pos_ == 0 && !flushed_head_)) {
        const char* base = data_.data();
        const void* nl = cursor_ > 0 ? ::memrchr(base, '\n', cursor_) : nullptr;
        if (nl != nullptr) {
          size_t at = static_cast<const char*>(nl) - base;
          std::string_view l(base + at + 1, cursor_ - at - 1);
          cursor_ = at;
          bool skip_trailing = first_segment_ && l.empty();
          first_segment_ = false;
          if (skip_trailing) continue;  // the file ends with '\n'
          if (Emit(l, line, line_no)) return true;
          continue;
        }
        if (pos_ == 0) {  // the first line of the file
          flushed_head_ = true;
          std::string_view l(base, cursor_);
          cursor_ = 0;
          bool skip = first_segment_ && l.empty();
          first_segment_ = false;
          done_ = true;
          if (!skip && Emit(l, line, line_no)) return true;
          return false;
        }
      }
      if (pos_ == 0) {
        done_ = true;
        break;
      }
      // Keep the unfinished line (its head is still ahead of us), capped.
      carry_.assign(data_.data(), std::min<size_t>(cursor_, max_line_ + 1));
      size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, pos_));
      pos_ -= n;
      data_.resize(n + carry_.size());
      if (PreadAll(fd_, data_.data(), n, static_cast<off_t>(pos_)) != static_cast<ssize_t>(n)) {
        status_ = ErrnoError(name_ + ": read failed", errno);
        done_ = true;
        break;
      }
      std::memcpy(data_.data() + n, carry_.data(), carry_.size());
      stats_.bytes += n;
      cursor_ = data_.size();
      have_data_ = true;
    }
    return false;
  }
  const Status& status() const override { return status_; }
  const ReadStats& stats() const override { return stats_; }

 private:
  bool Emit(std::string_view l, std::string_view* out, uint64_t* line_no) {
    uint64_t no = total_lines_ >= stats_.lines ? total_lines_ - stats_.lines : 0;
    ++stats_.lines;
    l = StripCr(l);
    if (l.size() > max_line_) {
      l = l.substr(0, max_line_);
      ++stats_.truncated_lines;
    }
    if (IsBinaryLine(l)) {
      ++stats_.binary_lines;
      return false;
    }
    *out = l;
    *line_no = no;
    return true;
  }

  int fd_;
  std::string name_;
  uint64_t total_lines_;
  size_t max_line_;
  uint64_t pos_ = 0;
  std::vector<char> data_;
  std::string carry_;
  size_t cursor_ = 0;
  bool have_data_ = false;
  bool first_segment_ = false;
  bool flushed_head_ = false;
  bool done_ = false;
  Status status_;
  ReadStats stats_;
};

}  // namespace

bool IsBinaryLine(std::string_view line) {
  if (line.empty()) return false;
  if (std::memchr(line.data(), '\0', line.size()) != nullptr) return true;
  // Text has almost no control bytes; random binary has ~12% of them.
  size_t n = std::min<size_t>(line.size(), 64);
  int control = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t' && c != '\r' && c != 0x1b) || c == 0x7f) ++control;
  }
  return control >= 3 || (n < 8 && control >= 1);
}

std::unique_ptr<LineReader> NewForwardLineReader(int fd, std::string name, size_t max_line_bytes,
                                                 std::FILE* spool, uint64_t spool_limit) {
  return std::make_unique<ForwardReader>(fd, std::move(name), max_line_bytes, spool, spool_limit);
}

std::unique_ptr<LineReader> NewBackwardLineReader(int fd, std::string name, uint64_t total_lines,
                                                  size_t max_line_bytes) {
  return std::make_unique<BackwardReader>(fd, std::move(name), total_lines, max_line_bytes);
}

bool SpoolComplete(const LineReader& reader) {
  auto* f = dynamic_cast<const ForwardReader*>(&reader);
  return f != nullptr && f->spool_complete();
}

}  // namespace specd::diagnose
