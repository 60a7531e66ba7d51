// DequantizeRow of every GGUF block type equals gguf-py's
// gguf.quants.dequantize bit for bit, on random blocks and edge cases, and
// QuantizeRow of the types gguf-py quantizes as ggml does equals its bytes;
// the cases come from tests/python/gguf_quants_reference.py (its docstring
// has the file layout read here).
#include <gtest/gtest.h>
#include <unistd.h>

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
  std::vector<float> values;    // (n_blocks, block_elems): dequantized, or quantization input
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

// Reads n_types records of the file; blocks_first: the blocks precede the
// values (dequantization records), else follow them. Empty on success, else
// what is wrong with the file.
std::string ReadSection(Reader& r, bool blocks_first, std::vector<Record>* out) {
  uint32_t n_types = 0;
  if (!r.Read(&n_types, 4)) return "truncated section header";
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
    const size_t value_bytes = rec.values.size() * sizeof(float);
    const bool ok = blocks_first ? r.Read(rec.blocks.data(), rec.blocks.size()) &&
                                       r.Read(rec.values.data(), value_bytes)
                                 : r.Read(rec.values.data(), value_bytes) &&
                                       r.Read(rec.blocks.data(), rec.blocks.size());
    if (!ok) return "truncated data of " + rec.name;
    out->push_back(std::move(rec));
  }
  return "";
}

// Runs the reference script into *dequantized and *quantized; empty on
// success, else why not.
std::string RunReference(std::vector<Record>* dequantized, std::vector<Record>* quantized) {
  // Per process: ctest runs this binary's tests side by side.
  const std::string out =
      ::testing::TempDir() + "gguf_quants_reference-" + std::to_string(::getpid()) + ".bin";
  const std::string cmd = "'" + testing::ReferencePython() + "' '" + SPECD_SOURCE_DIR +
                          "/tests/python/gguf_quants_reference.py' '" + out + "'";
  if (std::system(cmd.c_str()) != 0) return "failed: " + cmd;
  std::ifstream f(out, std::ios::binary);
  if (!f) return "cannot open " + out;
  Reader r(std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {}));
  std::remove(out.c_str());
  std::string err = ReadSection(r, /*blocks_first=*/true, dequantized);
  if (err.empty()) err = ReadSection(r, /*blocks_first=*/false, quantized);
  return err;
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

class GgufQuantsReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = testing::PythonModuleMissing("gguf");
    if (!why.empty()) SPECD_REFERENCE_MISSING(why);
    ASSERT_EQ(RunReference(&dequantized_, &quantized_), "");
  }

  std::vector<Record> dequantized_, quantized_;
};

// Bitwise comparison of n f32 values; reports the first few differences.
void ExpectSameBits(const std::string& name, int64_t block_elems, const float* got,
                    const float* want, int64_t n) {
  int mismatches = 0;
  for (int64_t i = 0; i < n && mismatches < 5; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b) {
      ++mismatches;
      ADD_FAILURE() << name << " block " << i / block_elems << " element " << i % block_elems
                    << ": specd " << got[i] << " (0x" << std::hex << a << "), gguf-py " << want[i]
                    << " (0x" << b << ")" << std::dec;
    }
  }
}

TEST_F(GgufQuantsReferenceTest, DequantizeIsBitExactForEveryType) {
  std::vector<std::string> names;
  for (const Record& rec : dequantized_) {
    names.push_back(rec.name);
    DType t;
    ASSERT_TRUE(DTypeFromGgufName(rec.name, &t)) << rec.name;
    ASSERT_EQ(DTypeBlockElems(t), static_cast<int>(rec.block_elems)) << rec.name;
    ASSERT_EQ(DTypeBlockBytes(t), rec.block_bytes) << rec.name;
    // All blocks as one row.
    const int64_t n = static_cast<int64_t>(rec.n_blocks) * rec.block_elems;
    std::vector<float> got(static_cast<size_t>(n));
    DequantizeRow(t, rec.blocks.data(), got.data(), n);
    ExpectSameBits(rec.name, rec.block_elems, got.data(), rec.values.data(), n);
    EXPECT_GT(rec.n_blocks, 100u) << rec.name;
  }
  const std::vector<std::string> want = {"Q4_0", "Q8_0", "Q4_1", "Q5_0", "Q5_1",   "Q2_K",
                                         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};
  EXPECT_EQ(names, want);
}

TEST_F(GgufQuantsReferenceTest, QuantizeMatchesGgmlWhereGgufPyDoes) {
  std::vector<std::string> names;
  for (const Record& rec : quantized_) {
    names.push_back(rec.name);
    DType t;
    ASSERT_TRUE(DTypeFromGgufName(rec.name, &t)) << rec.name;
    const int64_t n = static_cast<int64_t>(rec.n_blocks) * rec.block_elems;
    std::vector<uint8_t> got(rec.blocks.size());
    QuantizeRow(t, rec.values.data(), got.data(), n);
    int mismatches = 0;
    for (uint32_t b = 0; b < rec.n_blocks && mismatches < 5; ++b) {
      const size_t off = static_cast<size_t>(b) * rec.block_bytes;
      if (std::memcmp(got.data() + off, rec.blocks.data() + off, rec.block_bytes) != 0) {
        ++mismatches;
        ADD_FAILURE() << rec.name << " block " << b << " differs from gguf-py's";
      }
    }
  }
  const std::vector<std::string> want = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"};
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace specd
