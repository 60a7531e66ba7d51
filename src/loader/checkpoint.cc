#include "loader/checkpoint.h"

#include <fmt/format.h>

namespace specd {

StatusOr<TensorView> Checkpoint::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return NotFoundError(fmt::format("{}: tensor '{}' not found ({} checkpoint with {} tensors)",
                                     path_, name, format_, tensors_.size()));
  }
  return it->second;
}

StatusOr<TensorView> Checkpoint::Get(const std::string& name,
                                     const std::vector<int64_t>& shape) const {
  ASSIGN_OR_RETURN(TensorView t, Get(name));
  if (t.shape != shape) {
    return InvalidArgumentError(fmt::format("{}: tensor '{}': expected shape {}, found {}", path_,
                                            name, ShapeToString(shape), ShapeToString(t.shape)));
  }
  return t;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.nbytes;
  return n;
}

StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpoint(const std::string& path,
                                                     const LoadOptions& options) {
  return UnsupportedError(path + ": checkpoint loading is not implemented yet");
}

}  // namespace specd
