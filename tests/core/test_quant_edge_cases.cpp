// weft's quantizers and dequantizers on the hard cases of a scale search,
// against ggml's own: tests/data/quant-edge-vectors.json holds, for each of
// the 13 block types weft writes, rows of all-zero and signed-zero blocks,
// constant blocks (positive, negative, one value per block), flat blocks
// with one outlier, tiny values (f16-subnormal scales, scales that round to
// zero, f32 subnormals), values at the f16 maximum, alternating signs and
// rounding midpoints, with the bytes ggml's quantizer made of them (the
// entry points llama-quantize uses without an importance matrix) and the
// floats ggml's dequantizer returned (tests/data/quant_edge_vectors.c says
// how it was built and run). Both directions must match bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/quant_any.h"
#include "quant_vectors.h"
#include "weft/core/dtype.h"
#include "weft/core/quant.h"

namespace weft {
namespace {

using test::VectorRow;
using test::VectorType;

const std::vector<VectorType>& edge_vectors() {
  static const std::vector<VectorType> types = test::load_vector_file("quant-edge-vectors.json");
  return types;
}

// The row kinds, in the generator's order (its "row_names").
constexpr const char* kRowKinds[] = {"zeros and signed zeros",    "constant positive",
                                     "constant negative",         "constant blocks, flat blocks with one outlier",
                                     "tiny and subnormal values", "near the f16 maximum",
                                     "alternating signs",         "rounding midpoints, zero sub-blocks"};
constexpr size_t kRowCount = sizeof kRowKinds / sizeof kRowKinds[0];

using test::dequantize_any;
using test::quantize_any;

TEST(QuantEdgeCases, CoverEveryWrittenTypeAndEveryCase) {
  std::set<uint32_t> ids;
  for (const VectorType& t : edge_vectors()) {
    ids.insert(t.gguf_id);
    EXPECT_EQ(t.rows.size(), kRowCount) << t.name;
  }
  // Every type weft can write, q8_K aside (an activation type, never in a file).
  const std::set<uint32_t> want{2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 39};
  EXPECT_EQ(ids, want);
  for (const QuantTypeInfo& info : quant_types()) {
    if (info.gguf_id != 15) {
      EXPECT_TRUE(ids.count(info.gguf_id)) << info.name;
    }
  }
  // The rows are what they say: zeros, one constant, the f16 maximum.
  const VectorType& first = edge_vectors().front();
  for (float v : first.rows[0].input) EXPECT_EQ(v, 0.0f);
  for (float v : first.rows[1].input) EXPECT_EQ(v, first.rows[1].input[0]);
  EXPECT_GT(first.rows[1].input[0], 0.0f);
  for (float v : first.rows[2].input) EXPECT_EQ(v, first.rows[2].input[0]);
  EXPECT_LT(first.rows[2].input[0], 0.0f);
  EXPECT_EQ(first.rows[5].input[0], 65504.0f);
}

// Quantizing each hard case gives ggml's bytes, block by block.
TEST(QuantEdgeCases, QuantizeMatchesGgmlByteForByte) {
  for (const VectorType& t : edge_vectors()) {
    for (size_t r = 0; r < t.rows.size() && r < kRowCount; ++r) {
      const VectorRow& row = t.rows[r];
      const auto n = static_cast<int64_t>(row.input.size());
      ASSERT_EQ(row.quantized.size(), static_cast<size_t>(n / t.block_values) * t.block_bytes) << t.name;
      std::vector<uint8_t> out(row.quantized.size(), 0xA5);
      quantize_any(t.gguf_id, row.input.data(), out.data(), n);
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == row.quantized[i]) continue;
        ADD_FAILURE() << t.name << ", " << kRowKinds[r] << ": block " << i / t.block_bytes << " byte "
                      << i % t.block_bytes << " is 0x" << std::hex << int{out[i]} << ", ggml wrote 0x"
                      << int{row.quantized[i]};
        break;
      }
    }
  }
}

// ggml's bytes decode to ggml's floats, bit for bit (signed zeros included).
TEST(QuantEdgeCases, DequantizeMatchesGgmlBitForBit) {
  for (const VectorType& t : edge_vectors()) {
    for (size_t r = 0; r < t.rows.size() && r < kRowCount; ++r) {
      const VectorRow& row = t.rows[r];
      std::vector<float> out(row.dequantized.size());
      dequantize_any(t.gguf_id, row.quantized.data(), out.data(), static_cast<int64_t>(out.size()));
      for (size_t i = 0; i < out.size(); ++i) {
        if (std::memcmp(&out[i], &row.dequantized[i], sizeof(float)) == 0) continue;
        ADD_FAILURE() << t.name << ", " << kRowKinds[r] << ": value " << i << " is " << out[i] << ", ggml gave "
                      << row.dequantized[i];
        break;
      }
    }
  }
}

}  // namespace
}  // namespace weft
