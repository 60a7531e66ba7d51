// Helpers shared by the loader and modelgen tests (header-only, tests only).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensor/tensor_view.h"

namespace specd::testing_util {

// A fresh temporary folder, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd_loader_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<float> RowOf(const TensorView& t, int64_t r) {
  std::vector<float> out(static_cast<size_t>(t.cols()));
  DequantizeRow(t.dtype, t.row(r), out.data(), t.cols());
  return out;
}

}  // namespace specd::testing_util
