// GGUF files specd writes in every tensor type it reads are read the same by
// gguf-py (llama.cpp's Python package): each tensor's name, ggml type, shape
// and dequantized values (bit for bit) as specd's reader and DequantizeRow
// see them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "base/test_reference.h"
#include "loader/gguf_reader.h"
#include "loader/test_util.h"
#include "modelgen/gguf_writer.h"

namespace specd {
namespace {

constexpr DType kTypes[] = {DType::kF32,  DType::kF16,    DType::kBF16,  DType::kQ8_0,
                            DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0,  DType::kQ5_1,
                            DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K,
                            DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

struct PyTensor {
  std::string name, type;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Parses gguf_read_tensors.py's output; empty on success, else what is wrong.
std::string ReadPyTensors(const std::string& path, std::vector<PyTensor>* out) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  size_t pos = 0;
  auto read = [&](void* dst, size_t n) {
    if (b.size() - pos < n) return false;
    std::memcpy(dst, b.data() + pos, n);
    pos += n;
    return true;
  };
  uint32_t n = 0;
  if (!read(&n, 4)) return "truncated";
  for (uint32_t i = 0; i < n; ++i) {
    PyTensor t;
    uint16_t name_len = 0;
    uint8_t type_len = 0;
    uint32_t n_dims = 0;
    if (!read(&name_len, 2)) return "truncated";
    t.name.resize(name_len);
    if (!read(t.name.data(), name_len) || !read(&type_len, 1)) return "truncated";
    t.type.resize(type_len);
    if (!read(t.type.data(), type_len) || !read(&n_dims, 4)) return "truncated";
    t.shape.resize(n_dims);
    int64_t numel = 1;
    for (auto& d : t.shape) {
      uint64_t v = 0;
      if (!read(&v, 8)) return "truncated";
      d = static_cast<int64_t>(v);
      numel *= d;
    }
    t.values.resize(static_cast<size_t>(numel));
    if (!read(t.values.data(), t.values.size() * sizeof(float))) return "truncated " + t.name;
    out->push_back(std::move(t));
  }
  return "";
}

TEST(GgufBlockTypesWriterTest, GgufPyReadsEveryTypeAsSpecdDoes) {
  const std::string why = testing::PythonModuleMissing("gguf");
  if (!why.empty()) SPECD_REFERENCE_MISSING(why);
  testing_util::TempDir tmp;
  const std::string path = tmp.path() + "/types.gguf", out = tmp.path() + "/types.bin";
  // 3 rows of 512: two 256-element super-blocks or sixteen 32-element
  // blocks, values at several scales with a spike per row.
  const int64_t rows = 3, cols = 512;
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  for (DType t : kTypes) {
    const std::string name = std::string("t.") + DTypeName(t);
    ASSERT_TRUE(w.AddTensor(name, t, {rows, cols}, [t, cols](int64_t r, float* x) {
                   std::mt19937 rng(static_cast<uint32_t>(r * 31 + static_cast<int>(t)));
                   std::normal_distribution<float> dist(0.f, 0.02f * (1 + r));
                   for (int64_t i = 0; i < cols; ++i) x[i] = dist(rng);
                   x[(r * 97) % cols] = 0.5f;
                 }).ok());
  }
  ASSERT_TRUE(w.Write(path).ok());

  const std::string cmd = "'" + testing::ReferencePython() + "' '" + SPECD_SOURCE_DIR +
                          "/tests/python/gguf_read_tensors.py' '" + path + "' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<PyTensor> py;
  ASSERT_EQ(ReadPyTensors(out, &py), "");

  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  auto file = ParseGguf(bytes.data(), bytes.size(), path, /*with_tensors=*/true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(py.size(), std::size(kTypes));
  ASSERT_EQ(file->tensors.size(), py.size());
  for (size_t i = 0; i < py.size(); ++i) {
    const GgufTensorInfo& ti = file->tensors[i];
    SCOPED_TRACE(ti.name);
    EXPECT_EQ(py[i].name, ti.name);
    EXPECT_EQ(py[i].type, GgmlTypeName(ti.ggml_type));
    EXPECT_EQ(ti.dtype, kTypes[i]);
    ASSERT_EQ(py[i].shape, (std::vector<int64_t>{rows, cols}));
    const uint8_t* data = bytes.data() + file->data_offset + ti.offset;
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(ti.dtype, data + r * RowBytes(ti.dtype, cols), row.data(), cols);
      ASSERT_EQ(std::memcmp(row.data(), py[i].values.data() + r * cols, cols * sizeof(float)), 0)
          << "row " << r;
    }
  }
}

}  // namespace
}  // namespace specd
