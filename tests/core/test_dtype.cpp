// dtype conversions checked against values worked out by hand from the
// IEEE-754 and GGUF block definitions (FACTS.md).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "weft/core/dtype.h"

namespace weft {
namespace {

TEST(DType, TraitsMatchGgufLayouts) {
  EXPECT_EQ(traits(DType::q8_0).unit_bytes, 34u);
  EXPECT_EQ(traits(DType::q4_0).unit_bytes, 18u);
  EXPECT_EQ(traits(DType::q4_0).block_size, 32);
  EXPECT_EQ(row_bytes(DType::q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(DType::f16, 7), 14u);
  EXPECT_EQ(dtype_from_name("bf16"), DType::bf16);
  EXPECT_FALSE(dtype_from_name("q5_k").has_value());
}

TEST(DType, HalfKnownBitPatterns) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);           // rounds up to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie rounds to even (zero)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_FLOAT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0xFC00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if ((bits & 0x7C00) == 0x7C00) continue;  // inf and NaN
    ASSERT_EQ(f32_to_f16(f16_to_f32(bits)), bits) << std::hex << h;
  }
}

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie to even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie to even, up
  EXPECT_FLOAT_EQ(bf16_to_f32(0xC040), -3.0f);
}

TEST(DType, Q8_0FollowsTheBlockDefinition) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.25f;  // max |x| = 4
  BlockQ8_0 block;
  from_f32(DType::q8_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, f32_to_f16(4.0f / 127.0f));
  EXPECT_EQ(block.q[0], -127);
  EXPECT_EQ(block.q[16], 0);
  EXPECT_EQ(block.q[20], static_cast<int8_t>(std::lround(1.0f * 127.0f / 4.0f)));
  std::vector<float> y(32);
  to_f32(DType::q8_0, &block, y.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 4.0f / 127.0f);
}

TEST(DType, Q4_0FollowsTheBlockDefinition) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // the value of largest magnitude: d = -8 / -8 = 1
  x[1] = 3.0f;
  x[17] = -2.0f;
  BlockQ4_0 block;
  from_f32(DType::q4_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, f32_to_f16(1.0f));
  EXPECT_EQ(block.q[0] & 0xF, 0);         // -8 + 8
  EXPECT_EQ(block.q[1] & 0xF, 11);        // 3 + 8
  EXPECT_EQ(block.q[1] >> 4, 6);          // x[17] = -2
  EXPECT_EQ(block.q[2], 8 | (8 << 4));    // zeros
  std::vector<float> y(32);
  to_f32(DType::q4_0, &block, y.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
}

TEST(DType, QuantizingZerosGivesZeroScale) {
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  std::vector<uint8_t> buf(row_bytes(DType::q4_0, 64));
  from_f32(DType::q4_0, x.data(), buf.data(), 64);
  to_f32(DType::q4_0, buf.data(), y.data(), 64);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(DType, I32SaturatesInsteadOfOverflowing) {
  const float x[] = {3.9f, -3.9f, 1e20f, -1e20f, std::numeric_limits<float>::quiet_NaN()};
  int32_t y[5];
  from_f32(DType::i32, x, y, 5);
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], -3);
  EXPECT_EQ(y[2], INT32_MAX);
  EXPECT_EQ(y[3], INT32_MIN);
  EXPECT_EQ(y[4], 0);
}

}  // namespace
}  // namespace weft
