// DequantizeRow of every GGUF block type equals gguf-py's
// gguf.quants.dequantize bit for bit, on random blocks and edge cases made by
// tests/python/gguf_dequantize_reference.py (its docstring has the file
// layout read here).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/test_reference.h"
#include "tensor/dtype.h"

namespace specd {
namespace {

struct Record {
  std::string name;  // gguf's name, e.g. "Q4_K"
  uint32_t block_elems = 0, block_bytes = 0, n_blocks = 0;
  std::vector<uint8_t> blocks;  // (n_blocks, block_bytes)
  std::vector<float> values;    // (n_blocks, block_elems)
};

class Reader {
 public:
  explicit Reader(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  bool Read(void* out, size_t n) {
    if (bytes_.size() - pos_ < n) return false;
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
};

// Empty on success, else what is wrong with the file.
std::string ReadRecords(const std::string& path, std::vector<Record>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot open " + path;
  Reader r(std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {}));
  uint32_t n_types = 0;
  if (!r.Read(&n_types, 4)) return "truncated header";
  for (uint32_t i = 0; i < n_types; ++i) {
    Record rec;
    uint8_t len = 0;
    if (!r.Read(&len, 1)) return "truncated record";
    rec.name.resize(len);
    if (!r.Read(rec.name.data(), len) || !r.Read(&rec.block_elems, 4) ||
        !r.Read(&rec.block_bytes, 4) || !r.Read(&rec.n_blocks, 4)) {
      return "truncated record";
    }
    rec.blocks.resize(static_cast<size_t>(rec.n_blocks) * rec.block_bytes);
    rec.values.resize(static_cast<size_t>(rec.n_blocks) * rec.block_elems);
    if (!r.Read(rec.blocks.data(), rec.blocks.size()) ||
        !r.Read(rec.values.data(), rec.values.size() * sizeof(float))) {
      return "truncated data of " + rec.name;
    }
    out->push_back(std::move(rec));
  }
  return "";
}

// The dtype whose DTypeName is gguf's name in lower case.
bool DTypeFromGgufName(const std::string& name, DType* out) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int t = 0; t <= static_cast<int>(DType::kIQ4_XS); ++t) {
    if (lower == DTypeName(static_cast<DType>(t))) {
      *out = static_cast<DType>(t);
      return true;
    }
  }
  return false;
}

TEST(GgufDequantizeReferenceTest, EveryTypeIsBitExact) {
  const std::string why = testing::PythonModuleMissing("gguf");
  if (!why.empty()) SPECD_REFERENCE_MISSING(why);
  const std::string out = ::testing::TempDir() + "gguf_dequantize_reference.bin";
  const std::string cmd = "'" + testing::ReferencePython() + "' '" + SPECD_SOURCE_DIR +
                          "/tests/python/gguf_dequantize_reference.py' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<Record> records;
  const std::string err = ReadRecords(out, &records);
  std::remove(out.c_str());
  ASSERT_EQ(err, "");
  std::vector<std::string> names;
  for (const Record& rec : records) {
    names.push_back(rec.name);
    DType t;
    ASSERT_TRUE(DTypeFromGgufName(rec.name, &t)) << rec.name;
    ASSERT_EQ(DTypeBlockElems(t), static_cast<int>(rec.block_elems)) << rec.name;
    ASSERT_EQ(DTypeBlockBytes(t), rec.block_bytes) << rec.name;
    // All blocks as one row.
    const int64_t n = static_cast<int64_t>(rec.n_blocks) * rec.block_elems;
    std::vector<float> got(static_cast<size_t>(n));
    DequantizeRow(t, rec.blocks.data(), got.data(), n);
    int mismatches = 0;
    for (int64_t i = 0; i < n && mismatches < 5; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &rec.values[i], 4);
      if (a != b) {
        ++mismatches;
        ADD_FAILURE() << rec.name << " block " << i / rec.block_elems << " element "
                      << i % rec.block_elems << ": specd " << got[i] << " (0x" << std::hex << a
                      << "), gguf-py " << rec.values[i] << " (0x" << b << ")" << std::dec;
      }
    }
    EXPECT_GT(rec.n_blocks, 100u) << rec.name;
  }
  const std::vector<std::string> want = {"Q4_0", "Q8_0", "Q4_1", "Q5_0", "Q5_1",   "Q2_K",
                                         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace specd
