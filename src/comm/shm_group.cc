#include "comm/shm_group.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/env.h"
#include "base/logging.h"
#include "comm/shm_communicator.h"
#include "comm/shm_layout.h"

namespace specd {
namespace {

using shm::Header;
using shm::SlotCtrl;

constexpr const char* kStage = "comm init";

size_t MappingBytes(int world, size_t buffer_bytes, size_t* slot_bytes) {
  *slot_bytes = shm::kPage + 3 * buffer_bytes;
  return shm::kPage + static_cast<size_t>(world) * *slot_bytes;
}

Status ValidateCreate(int world, const ShmOptions& o) {
  if (world < 1 || world > shm::kMaxWorld) {
    return InvalidArgumentError("shm group: world size " + std::to_string(world) +
                                ": expected 1.." + std::to_string(shm::kMaxWorld));
  }
  if (o.buffer_bytes < shm::kMinBufferBytes || o.buffer_bytes % shm::kPage != 0) {
    return InvalidArgumentError("shm group: buffer_bytes " + std::to_string(o.buffer_bytes) +
                                ": expected a multiple of 4096, at least " +
                                std::to_string(shm::kMinBufferBytes));
  }
  return Status::Ok();
}

// Writes the header and initializes every slot's control block.
Status InitMapping(void* base, int world, size_t buffer_bytes) {
  size_t slot_bytes = 0;
  const size_t total = MappingBytes(world, buffer_bytes, &slot_bytes);
  auto* h = static_cast<Header*>(base);
  h->version = shm::kVersion;
  h->world = static_cast<uint32_t>(world);
  h->buffer_bytes = buffer_bytes;
  h->slot_bytes = slot_bytes;
  h->slots_offset = shm::kPage;
  h->total_bytes = total;
  h->creator_pid = static_cast<int32_t>(getpid());
  for (int r = 0; r < world; ++r) {
    auto* c = new (static_cast<char*>(base) + shm::kPage + r * slot_bytes) SlotCtrl();
    c->arrive.store(0, std::memory_order_relaxed);
    c->reduced.store(0, std::memory_order_relaxed);
    c->state.store(shm::kEmpty, std::memory_order_relaxed);
    c->pid.store(0, std::memory_order_relaxed);
    c->failed_call.store(0, std::memory_order_relaxed);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&c->liveness, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) return ErrnoError("shm group: pthread_mutex_init of rank " + std::to_string(r), rc);
  }
  // The magic last, stored with release (loaded with acquire in MapExisting),
  // so a joiner never sees a half-initialized header as valid. An atomic
  // store rather than a fence before a plain one: that was a data race in the
  // C++ model, and g++ rejects atomic_thread_fence under -fsanitize=thread.
  std::atomic_ref<uint64_t>(h->magic).store(shm::kMagic, std::memory_order_release);
  return Status::Ok();
}

StatusOr<std::shared_ptr<ShmRegion>> CreateRegion(int fd, std::string name, int world,
                                                  const ShmOptions& o) {
  size_t slot_bytes = 0;
  const size_t total = MappingBytes(world, o.buffer_bytes, &slot_bytes);
  const std::string what = name.empty() ? std::string("memfd") : name;
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    Status st = ErrnoError("shm group: ftruncate " + what + " to " + std::to_string(total) + " bytes",
                           errno);
    close(fd);
    if (!name.empty()) shm_unlink(name.c_str());
    return st.WithHint("is /dev/shm large enough? (df -h /dev/shm)");
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status st = ErrnoError("shm group: mmap " + what + " (" + std::to_string(total) + " bytes)", errno);
    close(fd);
    if (!name.empty()) shm_unlink(name.c_str());
    return st;
  }
  // A named group needs no fd once mapped.
  int keep_fd = fd;
  if (!name.empty()) {
    close(fd);
    keep_fd = -1;
  }
  auto region = std::make_shared<ShmRegion>(base, total, keep_fd, std::move(name));
  RETURN_IF_ERROR(InitMapping(base, world, o.buffer_bytes));
  return region;
}

// Maps an existing group through `fd` (closed here in every case) and checks
// its header against the file size.
StatusOr<std::shared_ptr<ShmRegion>> MapExisting(int fd, const std::string& what) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Status s = ErrnoError("shm group " + what + ": fstat", errno);
    close(fd);
    return s;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < shm::kPage) {
    close(fd);
    return InvalidArgumentError("shm group " + what + ": " + std::to_string(size) +
                                " bytes: too small to hold a header (4096 bytes)");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) return ErrnoError("shm group " + what + ": mmap", err);
  auto region = std::make_shared<ShmRegion>(base, size, -1, "");
  const Header* h = region->header();
  const uint64_t magic =
      std::atomic_ref<uint64_t>(const_cast<uint64_t&>(h->magic)).load(std::memory_order_acquire);
  if (magic != shm::kMagic || h->version != shm::kVersion) {
    return InvalidArgumentError("shm group " + what + ": bad header (magic/version " +
                                std::to_string(magic) + "/" + std::to_string(h->version) +
                                ", expected " + std::to_string(shm::kMagic) + "/" +
                                std::to_string(shm::kVersion) + ")");
  }
  size_t slot_bytes = 0;
  if (h->world < 1 || h->world > shm::kMaxWorld ||
      h->buffer_bytes < shm::kMinBufferBytes ||
      MappingBytes(static_cast<int>(h->world), h->buffer_bytes, &slot_bytes) != h->total_bytes ||
      slot_bytes != h->slot_bytes || h->slots_offset != shm::kPage || h->total_bytes != size) {
    return InvalidArgumentError("shm group " + what + ": inconsistent header (world " +
                                std::to_string(h->world) + ", buffer " +
                                std::to_string(h->buffer_bytes) + " bytes, total " +
                                std::to_string(h->total_bytes) + " bytes, file " +
                                std::to_string(size) + " bytes)");
  }
  return region;
}

}  // namespace

ShmRegion::~ShmRegion() {
  munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  if (!name_.empty()) shm_unlink(name_.c_str());
}

Status ShmRegion::Unlink() {
  if (name_.empty()) return Status::Ok();
  const std::string name = std::move(name_);
  name_.clear();
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("shm group: shm_unlink " + name, errno);
  }
  return Status::Ok();
}

ShmOptions ShmOptionsFromEnv() {
  ShmOptions o;
  if (const auto env = GetEnv(EnvVar::kCommTimeoutS)) {
    const char* v = env->c_str();
    char* end = nullptr;
    double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s > 0) {
      o.timeout_s = s;
    } else {
      LogOnce(LogLevel::kWarn, "SPECD_COMM_TIMEOUT_S", kStage,
              std::string("SPECD_COMM_TIMEOUT_S='") + v +
                  "' is not a positive number of seconds: ignored (using 60)");
    }
  }
  if (const auto env = GetEnv(EnvVar::kCommSpinUs)) {
    const char* v = env->c_str();
    char* end = nullptr;
    double us = std::strtod(v, &end);
    if (end != v && *end == '\0' && us >= 0) {
      o.spin_us = us;
    } else {
      LogOnce(LogLevel::kWarn, "SPECD_COMM_SPIN_US", kStage,
              std::string("SPECD_COMM_SPIN_US='") + v +
                  "' is not a number of microseconds >= 0: ignored (using 50)");
    }
  }
  if (const auto v = GetEnv(EnvVar::kAllreduceAlgo)) {
    auto a = ParseAllreduceAlgo(*v);
    if (a.ok()) {
      o.algo = *a;
    } else {
      LogOnce(LogLevel::kWarn, "SPECD_ALLREDUCE_ALGO", kStage,
              "SPECD_ALLREDUCE_ALGO: " + a.status().message() + ": ignored");
    }
  }
  return o;
}

ShmGroup::~ShmGroup() = default;
int ShmGroup::world_size() const { return region_->world(); }
size_t ShmGroup::mapping_bytes() const { return region_->bytes(); }
int ShmGroup::fd() const { return region_->fd(); }

std::string ShmGroup::HandoffSpec() const {
  if (region_->fd() >= 0) return "fd:" + std::to_string(region_->fd());
  return "name:" + region_->name();
}

Status ShmGroup::PrepareForExec() {
  const int fd = region_->fd();
  if (fd < 0) return Status::Ok();
  int flags = fcntl(fd, F_GETFD);
  if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) {
    return ErrnoError("shm group: clearing FD_CLOEXEC on fd " + std::to_string(fd), errno);
  }
  return Status::Ok();
}

Status ShmGroup::Unlink() { return region_->Unlink(); }

StatusOr<std::unique_ptr<ShmGroup>> CreateShmGroup(int world, const ShmOptions& options) {
  RETURN_IF_ERROR(ValidateCreate(world, options));
  int fd = memfd_create("specd-comm", MFD_CLOEXEC);
  if (fd < 0) return ErrnoError("shm group: memfd_create", errno).WithStage(kStage);
  auto region = CreateRegion(fd, "", world, options);
  if (!region.ok()) return Status(region.status()).WithStage(kStage);
  return std::unique_ptr<ShmGroup>(new ShmGroup(std::move(region).value()));
}

StatusOr<std::unique_ptr<ShmGroup>> CreateNamedShmGroup(int world, const std::string& name,
                                                        const ShmOptions& options) {
  RETURN_IF_ERROR(ValidateCreate(world, options));
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    return InvalidArgumentError("shm group name '" + name + "': expected '/name' without other '/'");
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("shm group: shm_open " + name, errno).WithStage(kStage);
  auto region = CreateRegion(fd, name, world, options);
  if (!region.ok()) return Status(region.status()).WithStage(kStage);
  return std::unique_ptr<ShmGroup>(new ShmGroup(std::move(region).value()));
}

StatusOr<std::unique_ptr<Communicator>> JoinShmGroup(const ShmGroup& group, int rank,
                                                     const ShmOptions& options) {
  return NewShmCommunicator(group.region(), rank, options);
}

StatusOr<std::unique_ptr<Communicator>> JoinShmGroupFromSpec(const std::string& spec, int rank,
                                                             const ShmOptions& options) {
  int fd = -1;
  if (spec.rfind("fd:", 0) == 0) {
    char* end = nullptr;
    long v = std::strtol(spec.c_str() + 3, &end, 10);
    if (end == spec.c_str() + 3 || *end != '\0' || v < 0 || v > 1 << 20) {
      return InvalidArgumentError("shm group spec '" + spec + "': expected fd:<number>");
    }
    fd = static_cast<int>(v);
    if (fcntl(fd, F_GETFD) < 0) {
      return ErrnoError("shm group spec '" + spec + "': fd " + std::to_string(fd) +
                            " is not open in this process (was FD_CLOEXEC cleared before exec?)",
                        errno)
          .WithStage(kStage);
    }
  } else if (spec.rfind("name:", 0) == 0) {
    const std::string name = spec.substr(5);
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return ErrnoError("shm group: shm_open " + name, errno).WithStage(kStage);
  } else {
    return InvalidArgumentError("shm group spec '" + spec + "': expected fd:<n> or name:/<name>");
  }
  auto region = MapExisting(fd, spec);
  if (!region.ok()) return Status(region.status()).WithStage(kStage).WithRank(rank);
  return NewShmCommunicator(std::move(region).value(), rank, options);
}

}  // namespace specd
