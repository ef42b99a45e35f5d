// The GGUF quantized types (include/weft/core/quant.h, and weft's q4_0 / q8_0
// dtypes) against vectors written by llama.cpp itself: tests/data/
// quant-vectors.json holds, per type, f32 rows, the bytes `llama-quantize
// --pure` wrote for them (no importance matrix) and the floats gguf-py
// dequantized those bytes to; tests/data/mxfp4-vectors.json the same for
// mxfp4 from ggml's quantize_row_mxfp4_ref / dequantize_row_mxfp4, edge
// cases included. Both directions must match bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/quant/blocks.h"
#include "core/quant_any.h"
#include "quant_vectors.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/core/quant.h"
#include "weft/core/splitmix64.h"

namespace weft {
namespace {

using test::quant_vectors;
using test::VectorRow;
using test::VectorType;

using test::dequantize_any;
using test::quantize_any;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Index of the first float whose bits differ, or -1.
int64_t first_float_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (bits(a[i]) != bits(b[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t first_byte_mismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// ---- Tests ---------------------------------------------------------------

TEST(QuantTypes, TableMatchesGgufLayouts) {
  struct Expected {
    uint32_t id;
    const char* name;
    int64_t values;
    size_t bytes;
  };
  const Expected expected[] = {{3, "q4_1", 32, 20},    {6, "q5_0", 32, 22},     {7, "q5_1", 32, 24},
                               {10, "q2_K", 256, 84},  {11, "q3_K", 256, 110},  {12, "q4_K", 256, 144},
                               {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210},  {15, "q8_K", 256, 292},
                               {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136}, {39, "mxfp4", 32, 17}};
  ASSERT_EQ(quant_types().size(), std::size(expected));
  for (const Expected& e : expected) {
    const QuantTypeInfo* info = quant_type_info(e.id);
    ASSERT_NE(info, nullptr) << e.name;
    EXPECT_EQ(info->name, e.name);
    EXPECT_EQ(info->block_values, e.values) << e.name;
    EXPECT_EQ(info->block_bytes, e.bytes) << e.name;
    EXPECT_EQ(quant_row_bytes(e.id, 4 * e.values), 4 * e.bytes) << e.name;
    EXPECT_EQ(quant_row_bytes(e.id, 0), 0u) << e.name;
  }
  EXPECT_EQ(quant_type_info(2), nullptr);  // q4_0 is a weft dtype
  EXPECT_EQ(quant_type_info(16), nullptr);
}

TEST(QuantTypes, VectorFileCoversEveryType) {
  std::vector<uint32_t> ids;
  for (const VectorType& t : quant_vectors()) {
    ids.push_back(t.gguf_id);
    EXPECT_EQ(t.rows.size(), 4u) << t.name;
    if (t.gguf_id == 2 || t.gguf_id == 8) continue;
    const QuantTypeInfo* info = quant_type_info(t.gguf_id);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->name, t.name);
    EXPECT_EQ(info->block_values, t.block_values) << t.name;
    EXPECT_EQ(info->block_bytes, t.block_bytes) << t.name;
  }
  // Every implemented type has vectors except q8_K, which llama-quantize
  // does not write (it is an activation type).
  for (const QuantTypeInfo& info : quant_types()) {
    if (info.gguf_id == 15) continue;
    EXPECT_NE(std::find(ids.begin(), ids.end(), info.gguf_id), ids.end()) << info.name;
  }
}

TEST(QuantTypes, DequantizeMatchesReferenceBitForBit) {
  for (const VectorType& t : quant_vectors()) {
    int matched = 0;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const VectorRow& row = t.rows[r];
      const auto n = static_cast<int64_t>(row.dequantized.size());
      std::vector<float> out(row.dequantized.size());
      dequantize_any(t.gguf_id, row.quantized.data(), out.data(), n);
      const int64_t bad = first_float_mismatch(out, row.dequantized);
      EXPECT_EQ(bad, -1) << t.name << " row " << r << ": got " << out[bad] << ", reference " << row.dequantized[bad];
      matched += bad == -1;
    }
    std::printf("[ quant    ] %-6s dequantize: %d/%zu rows bit-exact\n", t.name.c_str(), matched, t.rows.size());
  }
}

TEST(QuantTypes, QuantizeMatchesReferenceByteForByte) {
  for (const VectorType& t : quant_vectors()) {
    int matched = 0;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const VectorRow& row = t.rows[r];
      const auto n = static_cast<int64_t>(row.input.size());
      ASSERT_EQ(row.quantized.size(), static_cast<size_t>(n / t.block_values) * t.block_bytes) << t.name;
      std::vector<uint8_t> out(row.quantized.size());
      quantize_any(t.gguf_id, row.input.data(), out.data(), n);
      const int64_t bad = first_byte_mismatch(out, row.quantized);
      EXPECT_EQ(bad, -1) << t.name << " row " << r << ": first difference in block "
                         << bad / static_cast<int64_t>(t.block_bytes) << ", byte "
                         << bad % static_cast<int64_t>(t.block_bytes);
      matched += bad == -1;
    }
    std::printf("[ quant    ] %-6s quantize:   %d/%zu rows byte-exact\n", t.name.c_str(), matched, t.rows.size());
  }
}

TEST(QuantTypes, RowOfPartialBlocksIsRefusedNamingTheType) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> blocks(4096);
  for (const QuantTypeInfo& info : quant_types()) {
    for (int64_t n : {info.block_values - 1, info.block_values + 16, int64_t{-info.block_values}}) {
      for (int op = 0; op < 3; ++op) {
        try {
          if (op == 0) quant_row_bytes(info.gguf_id, n);
          if (op == 1) dequantize_row(info.gguf_id, blocks.data(), x.data(), n);
          if (op == 2) quantize_row_reference(info.gguf_id, x.data(), blocks.data(), n);
          ADD_FAILURE() << info.name << " accepted n = " << n;
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
          EXPECT_NE(std::string(e.what()).find(std::string(info.name)), std::string::npos) << e.what();
        }
      }
    }
  }
  try {
    dequantize_row(16, blocks.data(), x.data(), 256);  // iq2_xxs: not implemented
    ADD_FAILURE() << "unknown type accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
  }
}

TEST(QuantTypes, NonFiniteInputIsRefused) {
  std::vector<float> x(256, 0.5f);
  x[100] = std::nanf("");
  std::vector<uint8_t> blocks(512);
  for (const QuantTypeInfo& info : quant_types()) {
    try {
      quantize_row_reference(info.gguf_id, x.data(), blocks.data(), 256);
      ADD_FAILURE() << info.name << " accepted NaN";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << info.name;
    }
  }
}

TEST(QuantTypes, ZeroRowRoundTripsToZero) {
  const std::vector<float> x(512, 0.0f);
  for (const QuantTypeInfo& info : quant_types()) {
    std::vector<uint8_t> blocks(quant_row_bytes(info.gguf_id, 512));
    std::vector<float> y(512, 1.0f);
    quantize_row_reference(info.gguf_id, x.data(), blocks.data(), 512);
    dequantize_row(info.gguf_id, blocks.data(), y.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << info.name;
  }
}

// Roughly normal values (sum of four uniforms) with a few outliers, as
// weights tend to be.
std::vector<float> weight_like_row(uint64_t seed, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    double s = 0;
    for (int k = 0; k < 4; ++k) s += static_cast<double>(splitmix64(seed) >> 11) * 0x1.0p-53 - 0.5;
    v = static_cast<float>(s * 0.05);
    if (splitmix64(seed) % 97 == 0) v *= 6;
  }
  return x;
}

TEST(QuantTypes, RoundTripErrorIsBounded) {
  // Relative RMSE bounds, about 1.3x what each type reaches on these rows
  // (the outliers make them larger than the relative_rmse in the vectors).
  const std::map<std::string, double> bound = {{"q4_1", 0.115}, {"q5_0", 0.076},   {"q5_1", 0.056},  {"q2_K", 0.43},
                                               {"q3_K", 0.24},  {"q4_K", 0.106},   {"q5_K", 0.054},  {"q6_K", 0.029},
                                               {"q8_K", 0.020}, {"iq4_nl", 0.121}, {"iq4_xs", 0.123},
                                               {"mxfp4", 0.18}};
  constexpr int64_t n = 4096;
  for (const QuantTypeInfo& info : quant_types()) {
    double err2 = 0, ref2 = 0;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const std::vector<float> x = weight_like_row(seed * 7919, n);
      std::vector<uint8_t> blocks(quant_row_bytes(info.gguf_id, n));
      std::vector<float> y(n);
      quantize_row_reference(info.gguf_id, x.data(), blocks.data(), n);
      dequantize_row(info.gguf_id, blocks.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(y[i]) - x[i];
        err2 += d * d;
        ref2 += static_cast<double>(x[i]) * x[i];
      }
    }
    const double rel_rmse = std::sqrt(err2 / ref2);
    std::printf("[ quant    ] %-6s round trip relative RMSE %.5f\n", std::string(info.name).c_str(), rel_rmse);
    EXPECT_LE(rel_rmse, bound.at(std::string(info.name))) << info.name;
  }
}

TEST(QuantTypes, Q8_KBlockFollowsItsDefinition) {
  const std::vector<float> x = weight_like_row(42, 512);
  std::vector<quant::BlockQ8_K> blocks(2);
  quantize_row_reference(15, x.data(), blocks.data(), 512);
  std::vector<float> y(512);
  dequantize_row(15, blocks.data(), y.data(), 512);
  for (int b = 0; b < 2; ++b) {
    const quant::BlockQ8_K& block = blocks[static_cast<size_t>(b)];
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(256 * b + j)]));
    EXPECT_FLOAT_EQ(std::fabs(block.d), amax / 127);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += block.qs[16 * g + l];
      EXPECT_EQ(block.bsums[g], sum);
    }
    for (int j = 0; j < 256; ++j) {
      EXPECT_GE(block.qs[j], -127);
      EXPECT_EQ(bits(y[static_cast<size_t>(256 * b + j)]), bits(block.d * block.qs[j]));
    }
  }
}

// mxfp4 from its definition, on rows the vector file does not hold: the
// scale byte is floor(log2 amax) - 2 + 127 (amax's binary exponent, read
// with frexp), each value takes the first of the codes whose level times
// 2^(e - 128) is nearest to it (in double), and decodes to exactly that.
TEST(QuantTypes, Mxfp4FollowsItsDefinition) {
  constexpr int kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  constexpr int64_t n = 2048;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::vector<float> x = weight_like_row(seed * 104729, n);
    if (seed % 2 == 0) {  // magnitudes from 2^-30 to 2^30
      uint64_t s = seed;
      for (float& v : x) v = std::ldexp(v, static_cast<int>(splitmix64(s) % 61) - 30);
    }
    std::vector<quant::BlockMxfp4> blocks(n / 32);
    quantize_row_reference(39, x.data(), blocks.data(), n);
    std::vector<float> y(n);
    dequantize_row(39, blocks.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const quant::BlockMxfp4& blk = blocks[static_cast<size_t>(b)];
      const float* xb = x.data() + 32 * b;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
      int exp2 = 0;
      std::frexp(amax, &exp2);  // amax = m * 2^exp2, m in [0.5, 1)
      ASSERT_EQ(blk.e, exp2 - 1 - 2 + 127) << "block " << b << " amax " << amax;
      const double d = std::ldexp(1.0, blk.e - 128);
      for (int j = 0; j < 32; ++j) {
        const int code = j < 16 ? blk.qs[j] & 0xF : blk.qs[j - 16] >> 4;
        int best = 0;
        for (int c = 1; c < 16; ++c) {
          if (std::fabs(kLevels[c] * d - xb[j]) < std::fabs(kLevels[best] * d - xb[j])) best = c;
        }
        ASSERT_EQ(code, best) << "block " << b << " value " << j << ": " << xb[j] << " with scale " << d;
        ASSERT_EQ(y[static_cast<size_t>(32 * b + j)], static_cast<float>(kLevels[code] * d));
      }
    }
  }
}

}  // namespace
}  // namespace weft
