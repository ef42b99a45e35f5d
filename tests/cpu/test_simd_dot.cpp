// Every dot kernel at each SIMD level (simd_levels.h: a level this CPU lacks
// is a reported skip), against a float64 loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/simd.h"
#include "simd_levels.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

// The kernels of one level, which a CPU with every flag the level needs must
// be given (simd_levels.h: a level this CPU lacks is a skip with its reason).
std::vector<const DotKernels*> levels(Level l) {
  const DotKernels* k = dot_kernels_for(l);
  EXPECT_NE(k, nullptr) << "the " << level_test::level_name(l) << " dot kernels are refused on a CPU with every flag";
  if (k == nullptr) return {};
  return {k};
}

class SimdDotAtLevel : public level_test::LevelTest {};
WEFT_SIMD_LEVELS(SimdDotAtLevel);

std::vector<float> randoms(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

template <class T>
void store_raw(std::vector<uint8_t>& raw, const std::vector<T>& v) {
  const size_t bytes = v.size() * sizeof(T);
  raw.resize(bytes);
  if (bytes != 0) std::memcpy(raw.data(), v.data(), bytes);
}

// Weights already decoded to float (exactly) plus the raw storage.
struct Weights {
  std::vector<float> value;
  std::vector<uint8_t> raw;
};

Weights make_weights(DType t, int64_t n, uint32_t seed) {
  Weights w;
  std::vector<float> f = randoms(n, seed + 1);
  w.value.resize(static_cast<size_t>(n));
  switch (t) {
    case DType::f32:
      w.value = f;
      store_raw(w.raw, f);
      break;
    case DType::f16:
    case DType::bf16: {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        h[i] = t == DType::f16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        w.value[i] = t == DType::f16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
      }
      store_raw(w.raw, h);
      break;
    }
    default: break;  // i32; block types have the qdot.h kernels (test_qdot.cpp)
  }
  return w;
}

float call_single(const DotKernels& k, DType t, const void* w, const float* x, int64_t n) {
  switch (t) {
    case DType::f32: return k.f32(static_cast<const float*>(w), x, n);
    case DType::f16: return k.f16(static_cast<const uint16_t*>(w), x, n);
    case DType::bf16: return k.bf16(static_cast<const uint16_t*>(w), x, n);
    default: break;
  }
  return NAN;
}

// Checks the single-row and tile kernels of every level for one dtype and
// length against float64 sums.
void check(Level l, DType t, int64_t n, uint32_t seed) {
  std::vector<Weights> w;
  std::vector<std::vector<float>> xs;
  for (int i = 0; i < kTileRows; ++i) w.push_back(make_weights(t, n, seed * 17 + i));
  for (int j = 0; j < kTileCols; ++j) xs.push_back(randoms(n, seed * 31 + j));
  double want[kTileRows][kTileCols], tol[kTileRows][kTileCols];
  for (int i = 0; i < kTileRows; ++i)
    for (int j = 0; j < kTileCols; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double p = static_cast<double>(w[i].value[k]) * xs[j][k];
        s += p;
        mag += std::fabs(p);
      }
      want[i][j] = s;
      // f32 accumulation of n products: a few ulps of the magnitude per term.
      tol[i][j] = 1e-6 * mag * (4.0 + std::sqrt(static_cast<double>(n))) + 1e-30;
    }
  // The tile's weight rows, spaced more than a row apart.
  const size_t stride = w[0].raw.size() + 64;
  std::vector<uint8_t> rows(stride * kTileRows);
  for (int i = 0; i < kTileRows; ++i)
    if (!w[i].raw.empty()) std::memcpy(rows.data() + i * stride, w[i].raw.data(), w[i].raw.size());
  const float* xp[kTileCols];
  for (int j = 0; j < kTileCols; ++j) xp[j] = xs[j].data();

  const std::vector<const DotKernels*> ks = levels(l);
  ASSERT_FALSE(ks.empty());
  for (const DotKernels* k : ks) {
    const std::string what = std::string(k->name) + " " + std::string(dtype_name(t)) + " n=" + std::to_string(n);
    for (int i = 0; i < kTileRows; ++i)
      EXPECT_NEAR(call_single(*k, t, w[i].raw.data(), xp[i % kTileCols], n), want[i][i % kTileCols],
                  tol[i][i % kTileCols])
          << what << " row " << i;
    for (int nw = 1; nw <= kTileRows; ++nw)
      for (int nx = 1; nx <= kTileCols; ++nx) {
        float out[kTileRows * kTileCols];
        std::fill(out, out + kTileRows * kTileCols, NAN);
        k->tile(t)(rows.data(), stride, nw, xp, nx, n, out);
        for (int i = 0; i < kTileRows; ++i)
          for (int j = 0; j < kTileCols; ++j) {
            const float got = out[i * kTileCols + j];
            if (i < nw && j < nx) {
              EXPECT_NEAR(got, want[i][j], tol[i][j])
                  << what << " tile " << nw << "x" << nx << " [" << i << "," << j << "]";
            } else {
              EXPECT_TRUE(std::isnan(got)) << what << " tile " << nw << "x" << nx << " wrote outside";
            }
          }
      }
  }
}

TEST(SimdDot, LevelsAvailable) {
  ASSERT_NE(dot_kernels_for(Level::avx2), nullptr);
  const DotKernels& best = dot_kernels();
  EXPECT_TRUE(&best == dot_kernels_for(Level::avx2) || &best == dot_kernels_for(Level::avx512));
}

TEST_P(SimdDotAtLevel, Unquantized) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 1001, 4099})
      check(level(), t, n, static_cast<uint32_t>(n * 7 + static_cast<int>(t)));
}

TEST_P(SimdDotAtLevel, EmptyRowIsZero) {
  for (const DotKernels* k : levels(level())) {
    float w = 1, x = 1;
    EXPECT_EQ(k->f32(&w, &x, 0), 0.0f) << k->name;
  }
}

TEST(SimdDot, DotRowMatchesTable) {
  const Weights w = make_weights(DType::f16, 256, 5);
  const std::vector<float> x = randoms(256, 6);
  EXPECT_EQ(dot_row(DType::f16, w.raw.data(), x.data(), 256),
            dot_kernels().f16(reinterpret_cast<const uint16_t*>(w.raw.data()), x.data(), 256));
}

}  // namespace
}  // namespace weft::cpu
