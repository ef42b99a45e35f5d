// The AVX-512 (VNNI) quantized dot products against the generic kernels,
// which define their results: the tiles must agree up to float summation
// order on the same 8-bit activations, and the activation quantizers must
// write the same bytes as the scalar ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/qdot.h"
#include "backend/cpu/simd.h"
#include "simd_levels.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

// Whether this CPU runs the AVX-512 quantized kernels (AVX-512 with VNNI).
bool have_level() { return quant_dot_for(Level::avx512, DType::q8_0) != nullptr; }

std::vector<DType> table_types() {
  std::vector<DType> out;
  for (int i = 0; i < kDTypeCount; ++i)
    if (avx512_quant_table().by_type[i].tile != nullptr) out.push_back(static_cast<DType>(i));
  return out;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// One row of 8-bit activations and its values as doubles.
struct Acts {
  std::vector<uint8_t> q;
  std::vector<double> value;
};

Acts quantize_acts(ActType a, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const QuantDotTable& g = generic_quant_table();
  Acts r;
  r.q.resize(act_row_bytes(a, n));
  (a == ActType::q8_0 ? g.quantize_q8_0 : g.quantize_q8_K)(x.data(), r.q.data(), n);
  const int block = a == ActType::q8_0 ? kQuantBlock : kSuperBlock;
  const size_t unit = a == ActType::q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8K);
  for (int64_t b = 0; b < n / block; ++b) {
    const uint8_t* p = r.q.data() + b * unit;
    double d;
    if (a == ActType::q8_0) {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      d = f16_to_f32(h);
    } else {
      float f;
      std::memcpy(&f, p, sizeof f);
      d = f;
    }
    const auto* q = reinterpret_cast<const int8_t*>(p + (a == ActType::q8_0 ? 2 : 4));
    for (int i = 0; i < block; ++i) r.value.push_back(d * q[i]);
  }
  return r;
}

// Weight row r: uniform values with a row-dependent scale and mean; row 1
// starts with zeros (blocks whose scales are 0).
std::vector<float> weight_values(int r, int64_t n, uint32_t seed) {
  const float scale[4] = {1.0f, 0.05f, 3.0f, 0.7f};
  const float mean[4] = {0.0f, 0.0f, 1.0f, -0.4f};
  std::vector<float> v = uniform(static_cast<size_t>(n), seed, -scale[r], scale[r]);
  for (float& f : v) f += mean[r];
  if (r == 1)
    for (int64_t i = 0; i < std::min<int64_t>(n, 64); ++i) v[i] = 0.0f;
  return v;
}

void check_type(DType t, int64_t n) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(n));
  const QuantDot& mine = avx512_quant_table().by_type[static_cast<int>(t)];
  const QuantDot& ref = generic_quant_table().by_type[static_cast<int>(t)];
  ASSERT_EQ(mine.act, ref.act);
  const size_t row = row_bytes(t, n);
  const size_t stride = row + 6;  // rows not packed: the kernels must follow w_stride
  std::vector<uint8_t> w(kTileRows * stride, 0xEE);
  std::vector<std::vector<double>> wv(kTileRows);
  for (int r = 0; r < kTileRows; ++r) {
    const std::vector<float> v = weight_values(r, n, 100 + r + static_cast<uint32_t>(n));
    from_f32(t, v.data(), w.data() + r * stride, n);
    std::vector<float> back(static_cast<size_t>(n));
    to_f32(t, w.data() + r * stride, back.data(), n);
    wv[r].assign(back.begin(), back.end());
  }
  Acts x[kTileCols];
  const void* xs[kTileCols];
  for (int j = 0; j < kTileCols; ++j) {
    std::vector<float> v = uniform(static_cast<size_t>(n), 200 + j, -2.0f, 2.0f);
    if (j == 2)
      for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) v[i] = 0.0f;
    x[j] = quantize_acts(ref.act, v);
    xs[j] = x[j].q.data();
  }
  for (int nw = 1; nw <= kTileRows; ++nw) {
    for (int nx = 1; nx <= kTileCols; ++nx) {
      SCOPED_TRACE("nw=" + std::to_string(nw) + " nx=" + std::to_string(nx));
      float got[kTileRows * kTileCols], want[kTileRows * kTileCols];
      for (float& f : got) f = 12345.0f;
      mine.tile(w.data(), stride, nw, xs, nx, n, got);
      ref.tile(w.data(), stride, nw, xs, nx, n, want);
      for (int r = 0; r < kTileRows; ++r) {
        for (int j = 0; j < kTileCols; ++j) {
          if (r >= nw || j >= nx) {
            EXPECT_EQ(got[r * kTileCols + j], 12345.0f) << "wrote outside the tile at " << r << "," << j;
            continue;
          }
          double mag = 0;
          for (int64_t i = 0; i < n; ++i) mag += std::fabs(wv[r][i] * x[j].value[i]);
          EXPECT_NEAR(got[r * kTileCols + j], want[r * kTileCols + j], 1e-5 * mag + 1e-30) << "row " << r << " col " << j;
        }
      }
    }
  }
}

TEST(QuantDotAvx512, TilesMatchGenericKernel) {
  if (const std::string why = level_test::why_not_run(Level::avx512, true); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(have_level()) << "the AVX-512 VNNI table is refused on a CPU with every flag it needs";
  const std::vector<DType> types = table_types();
  ASSERT_FALSE(types.empty());
  for (DType t : types) {
    const bool super = traits(t).block_size == kSuperBlock;
    // 32-value types: one block, a partial chunk, whole chunks of 16 blocks,
    // and chunks plus a tail.
    const std::vector<int64_t> sizes =
        super ? std::vector<int64_t>{256, 512, 4352} : std::vector<int64_t>{32, 96, 512, 1024, 4128};
    for (int64_t n : sizes) check_type(t, n);
  }
}

TEST(QuantDotAvx512, TableCoversTheBandwidthTargets) {
  if (const std::string why = level_test::why_not_run(Level::avx512, true); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(have_level()) << "the AVX-512 VNNI table is refused on a CPU with every flag it needs";
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_K, DType::q5_K, DType::q6_K}) {
    EXPECT_NE(avx512_quant_table().by_type[static_cast<int>(t)].tile, nullptr) << dtype_name(t);
    EXPECT_EQ(quant_dot_for(Level::avx512, t), &avx512_quant_table().by_type[static_cast<int>(t)]);
  }
}

// Inputs for the quantizers, in 256-value blocks (8 q8_0 blocks each).
std::vector<float> quantizer_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> all;
  auto add = [&all](std::vector<float> v) { all.insert(all.end(), v.begin(), v.end()); };
  std::mt19937 rng(5);
  add(uniform(256, 1, -1.0f, 1.0f));
  // Wide dynamic range.
  {
    std::uniform_real_distribution<float> e(-30.0f, 30.0f);
    std::vector<float> v(256);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0 ? -1.0f : 1.0f) * std::exp(e(rng));
    add(v);
  }
  // Ties: with 127 (or 127 * 2^k) the largest value, d = 2^k exactly and
  // x / d lands on k + 0.5; nearbyint rounds those to even.
  for (float scale : {1.0f, 0.25f, 1024.0f}) {
    std::uniform_int_distribution<int> k(-127, 126);
    std::vector<float> v(256);
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (i % 32 == 5 ? 127.0f : static_cast<float>(k(rng)) + 0.5f);
    add(v);
    for (float& f : v) f = -f;  // negative largest value
    add(v);
  }
  add(std::vector<float>(256, 0.0f));
  add(std::vector<float>(256, -0.0f));
  add(std::vector<float>(256, 0.3f));
  add(std::vector<float>(256, -7.5f));
  // Largest magnitude twice with both signs: the first one sets the sign.
  {
    std::vector<float> v = uniform(256, 2, -1.0f, 1.0f);
    v[40] = -5.0f;
    v[200] = 5.0f;
    add(v);
    v[40] = 5.0f;
    v[200] = -5.0f;
    add(v);
  }
  // Huge, non-finite and subnormal values.
  {
    std::vector<float> v = uniform(256, 3, -1.0f, 1.0f);
    v[3] = FLT_MAX;
    v[70] = -FLT_MAX;
    v[140] = 1e38f;
    add(v);
    v = uniform(256, 4, -1.0f, 1.0f);
    v[10] = inf;
    v[100] = -inf;
    add(v);
    v = uniform(256, 5, -1.0f, 1.0f);
    v[0] = nan;
    v[33] = nan;
    v[255] = -nan;
    add(v);
    add(std::vector<float>(256, nan));
    add(std::vector<float>(256, -inf));
    v = uniform(256, 6, -1e-38f, 1e-38f);
    v[7] = 1e-45f;
    v[8] = -1e-40f;
    add(v);
    add(std::vector<float>(256, 1e-45f));
    v = uniform(256, 7, -1.0f, 1.0f);
    for (size_t i = 0; i < 32; ++i) v[i] = i == 9 ? 1e-39f : 0.0f;  // a block whose d is subnormal
    add(v);
  }
  // Many random blocks at random magnitudes.
  for (int b = 0; b < 64; ++b) {
    std::uniform_real_distribution<float> e(-40.0f, 40.0f);
    std::vector<float> v = uniform(256, 10 + b, -1.0f, 1.0f);
    const float s = std::exp(e(rng));
    for (float& f : v) f *= s;
    add(v);
  }
  return all;
}

TEST(QuantDotAvx512, ActivationQuantizersMatchScalarBytes) {
  if (const std::string why = level_test::why_not_run(Level::avx512, true); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(have_level()) << "the AVX-512 VNNI table is refused on a CPU with every flag it needs";
  const QuantDotTable& mine = avx512_quant_table();
  const QuantDotTable& ref = generic_quant_table();
  ASSERT_NE(mine.quantize_q8_0, nullptr);
  ASSERT_NE(mine.quantize_q8_K, nullptr);
  const std::vector<float> x = quantizer_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  for (ActType a : {ActType::q8_0, ActType::q8_K}) {
    auto q = [a](const QuantDotTable& t) { return a == ActType::q8_0 ? t.quantize_q8_0 : t.quantize_q8_K; };
    const size_t unit = a == ActType::q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8K);
    std::vector<uint8_t> got(act_row_bytes(a, n), 0xAB), want(act_row_bytes(a, n), 0xCD);
    q(mine)(x.data(), got.data(), n);
    q(ref)(x.data(), want.data(), n);
    for (size_t b = 0; b < got.size() / unit; ++b) {
      EXPECT_EQ(0, std::memcmp(got.data() + b * unit, want.data() + b * unit, unit))
          << (a == ActType::q8_0 ? "q8_0" : "q8_K") << " block " << b;
    }
  }
}

}  // namespace
}  // namespace weft::cpu
