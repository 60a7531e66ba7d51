// A read-only view of a whole file: either mmap-ed (zero copy) or read into
// anonymous memory (the engine default, see docs/performance.md; --mmap maps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace specd {

struct MapOptions {
  bool use_mmap = true;
  // With mmap: MAP_POPULATE (plus read-ahead and huge-page hints), so page
  // faults happen at load, not during decode. For weights, not for reading a
  // small part of a large file.
  bool populate = false;
  // Print a progress line while reading files larger than this (no-mmap only).
  size_t progress_min_bytes = size_t{256} << 20;
};

class MappedFile {
 public:
  // Fails with NotFound / IoError naming `path`.
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                    const MapOptions& options = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Aligned to at least 4096 bytes.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool is_mmap() const { return is_mmap_; }

 private:
  MappedFile() = default;
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_size_ = 0;
  bool is_mmap_ = false;
};

// Reads a whole (small) file into a string.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Writes `data` to `path` atomically enough for tests and tools (truncate+write).
Status WriteStringToFile(const std::string& path, const std::string& data);

}  // namespace specd
