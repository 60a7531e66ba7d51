// Status and StatusOr<T>: how fallible operations report errors across module
// boundaries (no exceptions cross a module).
//
// A non-OK Status carries a code, a message that names what was wrong (file,
// tensor, key, expected vs found), and optional context that the layers above
// add as the error travels up: the stage ("load weights", "allreduce #812") and
// the rank. The first layer that knows a fact attaches it; later layers do not
// overwrite a stage or rank that is already set.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace specd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // a caller or user supplied a bad value
  kNotFound,          // file, tensor, key, route missing
  kCorruption,        // a file's bytes contradict its own header
  kUnsupported,       // valid input this build cannot handle (dtype, arch)
  kIoError,           // the OS said no
  kOutOfRange,        // a value past a limit (context length, buffer size)
  kDeadlineExceeded,  // a wait ran past its deadline (peer never arrived)
  kUnavailable,       // a peer died or the service is shutting down
  kResourceExhausted, // queue full, out of KV pages, shm too small
  kCancelled,
  kInternal,          // a bug: an invariant did not hold
};

const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // Empty when not set.
  const std::string& stage() const;
  // -1 when not set.
  int rank() const { return state_ ? state_->rank : -1; }
  const std::string& hint() const;

  // Context setters return *this so an error can be decorated in one
  // expression: `return st.WithStage("load weights");`. They keep a value that
  // is already set, because the innermost layer knows best.
  Status& WithStage(std::string stage);
  Status& WithRank(int rank);
  Status& WithHint(std::string hint);
  // Prepends "prefix: " to the message (e.g. the file name).
  Status& Prepend(std::string_view prefix);

  // "Corruption: model.safetensors: tensor 'x' ... [stage: load weights, rank 1]"
  std::string ToString() const;

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::string stage;
    std::string hint;
    int rank = -1;
  };
  std::unique_ptr<State> state_;
};

Status InvalidArgumentError(std::string msg);
Status NotFoundError(std::string msg);
Status CorruptionError(std::string msg);
Status UnsupportedError(std::string msg);
Status IoError(std::string msg);
Status OutOfRangeError(std::string msg);
Status DeadlineExceededError(std::string msg);
Status UnavailableError(std::string msg);
Status ResourceExhaustedError(std::string msg);
Status CancelledError(std::string msg);
Status InternalError(std::string msg);
// IoError with strerror(errno) appended.
Status ErrnoError(std::string msg, int err);

// Holds either a value or a non-OK Status.
template <typename T>
class StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { EnsureError(); }
  StatusOr(Status&& status) : v_(std::move(status)) { EnsureError(); }
  StatusOr(const T& value) : v_(value) {}
  StatusOr(T&& value) : v_(std::move(value)) {}
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, T>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status&& TakeStatus() && { return std::move(std::get<Status>(v_)); }
  // REQUIRES: ok()
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::move(std::get<T>(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void EnsureError() {
    if (std::get<Status>(v_).ok()) v_ = InternalError("StatusOr constructed from an OK Status");
  }
  std::variant<Status, T> v_;
};

}  // namespace specd

#define SPECD_CONCAT_INNER(a, b) a##b
#define SPECD_CONCAT(a, b) SPECD_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::specd::Status _st = (expr);              \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(SPECD_CONCAT(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return std::move(tmp).TakeStatus(); \
  lhs = std::move(tmp).value()
