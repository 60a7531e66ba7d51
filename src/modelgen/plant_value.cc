#include "modelgen/plant_value.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "loader/safetensors_reader.h"
#include "tensor/dtype.h"

namespace specd {

Status PlantValue(const std::string& model_dir, const std::string& tensor, int64_t index,
                  float value) {
  const std::string path = model_dir + "/model.safetensors";
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFoundError(path + ": cannot open");
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto views = ParseSafetensors(bytes.data(), bytes.size(), path);
  if (!views.ok()) return views.status();
  for (const TensorView& v : *views) {
    if (v.name != tensor) continue;
    if (index < 0 || index >= v.numel())
      return OutOfRangeError(path + ": tensor " + tensor + " has " + std::to_string(v.numel()) +
                             " elements, element " + std::to_string(index) + " asked");
    const size_t es = v.dtype == DType::kF32 ? 4 : 2;
    const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(v.data) - bytes.data()) +
                      es * static_cast<size_t>(index);
    uint8_t elem[4];
    if (v.dtype == DType::kF32) {
      std::memcpy(elem, &value, 4);
    } else if (v.dtype == DType::kBF16 || v.dtype == DType::kF16) {
      const uint16_t h = v.dtype == DType::kBF16 ? F32ToBF16(value) : F32ToF16(value);
      std::memcpy(elem, &h, 2);
    } else {
      return UnsupportedError(path + ": tensor " + tensor + " is " +
                              SafetensorsDTypeName(v.dtype) + ", expected F32, BF16 or F16");
    }
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(at));
    out.write(reinterpret_cast<const char*>(elem), static_cast<std::streamsize>(es));
    if (!out) return IoError(path + ": write failed");
    return Status::Ok();
  }
  return NotFoundError(path + ": no tensor " + tensor);
}

}  // namespace specd
