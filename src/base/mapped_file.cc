#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "base/logging.h"

namespace specd {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                       const MapOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError(path + ": no such file");
    return ErrnoError(path + ": cannot open", err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path + ": cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    return f;
  }
  f->mapped_size_ = f->size_;
  if (options.use_mmap) {
    int flags = MAP_PRIVATE | (options.populate ? MAP_POPULATE : 0);
    void* p = ::mmap(nullptr, f->size_, PROT_READ, flags, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) return ErrnoError(path + ": mmap failed", err);
    if (options.populate) {
      // Weights about to be streamed every step: start read-ahead of the
      // whole file now, and ask for huge pages where the kernel maps
      // file-backed THP (fewer TLB misses). Hints only; failures are harmless.
      // Not for readers of a small part of a large file (a GGUF's vocabulary).
      ::madvise(p, f->size_, MADV_WILLNEED);
#ifdef MADV_HUGEPAGE
      ::madvise(p, f->size_, MADV_HUGEPAGE);
#endif
    }
    f->data_ = static_cast<uint8_t*>(p);
    f->is_mmap_ = true;
    return f;
  }
  void* p = ::mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path + ": cannot allocate " + std::to_string(f->size_) + " bytes", err);
  }
#ifdef MADV_HUGEPAGE
  ::madvise(p, f->size_, MADV_HUGEPAGE);
#endif
  f->data_ = static_cast<uint8_t*>(p);
  size_t done = 0;
  size_t next_report = options.progress_min_bytes;
  bool report = f->size_ >= options.progress_min_bytes;
  while (done < f->size_) {
    size_t want = std::min<size_t>(f->size_ - done, size_t{64} << 20);
    ssize_t n = ::pread(fd, f->data_ + done, want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      if (n == 0) return IoError(path + ": file shrank while reading");
      return ErrnoError(path + ": read failed", err);
    }
    done += static_cast<size_t>(n);
    if (report && done >= next_report) {
      LOG_INFO("load weights", "reading {}: {} / {} MiB", path, done >> 20, f->size_ >> 20);
      next_report += options.progress_min_bytes;
    }
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, mapped_size_);
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return NotFoundError(path + ": no such file");
    return IoError(path + ": cannot open for reading");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError(path + ": read failed");
  return ss.str();
}

Status WriteStringToFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError(path + ": cannot open for writing");
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace specd
