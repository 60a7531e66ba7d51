#include "base/status.h"

#include <cstring>

namespace specd {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

namespace {
const std::string& Empty() {
  static const std::string kEmpty;
  return kEmpty;
}
}  // namespace

Status::Status(StatusCode code, std::string message) {
  if (code == StatusCode::kOk) return;
  state_ = std::make_unique<State>();
  state_->code = code;
  state_->message = std::move(message);
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

const std::string& Status::message() const { return state_ ? state_->message : Empty(); }
const std::string& Status::stage() const { return state_ ? state_->stage : Empty(); }
const std::string& Status::hint() const { return state_ ? state_->hint : Empty(); }

Status& Status::WithStage(std::string stage) {
  if (state_ && state_->stage.empty()) state_->stage = std::move(stage);
  return *this;
}
Status& Status::WithRank(int rank) {
  if (state_ && state_->rank < 0) state_->rank = rank;
  return *this;
}
Status& Status::WithHint(std::string hint) {
  if (state_ && state_->hint.empty()) state_->hint = std::move(hint);
  return *this;
}
Status& Status::Prepend(std::string_view prefix) {
  if (state_) state_->message = std::string(prefix) + ": " + state_->message;
  return *this;
}

std::string Status::ToString() const {
  if (!state_) return "OK";
  std::string s = std::string(StatusCodeName(state_->code)) + ": " + state_->message;
  if (!state_->stage.empty() || state_->rank >= 0) {
    s += " [";
    if (!state_->stage.empty()) s += "stage: " + state_->stage;
    if (state_->rank >= 0) {
      if (!state_->stage.empty()) s += ", ";
      s += "rank " + std::to_string(state_->rank);
    }
    s += "]";
  }
  if (!state_->hint.empty()) s += " (hint: " + state_->hint + ")";
  return s;
}

Status InvalidArgumentError(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status CorruptionError(std::string m) { return Status(StatusCode::kCorruption, std::move(m)); }
Status UnsupportedError(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
Status OutOfRangeError(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
Status DeadlineExceededError(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
Status UnavailableError(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status ResourceExhaustedError(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
Status CancelledError(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status ErrnoError(std::string m, int err) {
  return Status(StatusCode::kIoError, std::move(m) + ": " + std::strerror(err));
}

}  // namespace specd
