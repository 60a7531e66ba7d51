#include "model/weight_binding.h"

#include <fmt/format.h>

#include <cstring>

namespace specd {

std::string LayerName(int l, const char* suffix) {
  return fmt::format("model.layers.{}.{}", l, suffix);
}

Status ReadVector(const Checkpoint& ck, const std::string& name, int64_t n, int64_t begin,
                  int64_t len, std::vector<float>* out) {
  ASSIGN_OR_RETURN(TensorView t, ck.Get(name, {n}));
  if (IsQuantized(t.dtype) || t.dtype == DType::kI64 || t.dtype == DType::kI32 ||
      t.dtype == DType::kBool || t.dtype == DType::kI8) {
    return UnsupportedError(fmt::format("{}: tensor {} has dtype {}, expected f32, f16 or bf16",
                                        ck.path(), name, DTypeName(t.dtype)));
  }
  std::vector<float> all(static_cast<size_t>(n));
  DequantizeRow(t.dtype, t.data, all.data(), n);
  out->assign(all.begin() + begin, all.begin() + begin + len);
  return Status::Ok();
}

Status BindLinear(const Checkpoint& ck, const std::string& name, int64_t out_full,
                  int64_t in_full, int64_t row_begin, int64_t row_len, int64_t col_begin,
                  int64_t col_len, Linear* lin) {
  ASSIGN_OR_RETURN(TensorView w, ck.Get(name, {out_full, in_full}));
  if (w.dtype != DType::kF32 && w.dtype != DType::kF16 && w.dtype != DType::kBF16 &&
      !IsQuantized(w.dtype)) {
    return UnsupportedError(fmt::format("{}: weight {} has dtype {}, expected a float or block-quantized dtype",
                                        ck.path(), name, DTypeName(w.dtype)));
  }
  if (w.layout != WeightLayout::kRows &&
      (col_begin != 0 || col_len != in_full || row_begin % 16 != 0 || row_len % 16 != 0)) {
    return InvalidArgumentError(fmt::format(
        "{}: weight {} was repacked at load in 16-row groups and cannot be sliced to rows "
        "[{}, {}), columns [{}, {}) (load it without repacking: --no-repack)",
        ck.path(), name, row_begin, row_begin + row_len, col_begin, col_begin + col_len));
  }
  lin->w = w;
  lin->w.shape = {row_len, col_len};
  if (col_begin == 0 && col_len == in_full) {
    lin->w.data = w.row(row_begin);
  } else {
    int block = DTypeBlockElems(w.dtype);
    if (col_begin % block != 0 || col_len % block != 0) {
      return InvalidArgumentError(fmt::format(
          "{}: cannot slice columns [{}, {}) of {} ({}): not on {}-element block boundaries",
          ck.path(), col_begin, col_begin + col_len, name, DTypeName(w.dtype), block));
    }
    size_t out_row = RowBytes(w.dtype, col_len);
    size_t skip = RowBytes(w.dtype, col_begin);
    lin->owned.resize(out_row * static_cast<size_t>(row_len));
    for (int64_t r = 0; r < row_len; ++r)
      std::memcpy(lin->owned.data() + r * out_row, w.row(row_begin + r) + skip, out_row);
    lin->w.data = lin->owned.data();
  }
  lin->w.nbytes = lin->w.row_bytes() * static_cast<size_t>(row_len);
  std::string bias_name = name.substr(0, name.size() - std::string("weight").size()) + "bias";
  if (ck.Has(bias_name)) {
    RETURN_IF_ERROR(ReadVector(ck, bias_name, out_full, row_begin, row_len, &lin->bias));
  }
  return Status::Ok();
}

}  // namespace specd
