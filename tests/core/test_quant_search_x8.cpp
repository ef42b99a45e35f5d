// The eight-lane scale searches (src/core/quant/search_x8.h) against the
// scalar ones they replace in q4_K, q5_K, q2_K and q6_K (search.h, whose
// bytes tests/core/test_quant_types.cpp and test_quant_edge_cases.cpp hold
// to ggml's): for groups drawn to reach every branch (flat and all-zero
// groups beside live ones, one-signed groups, ties, signed zeros, tiny and
// huge magnitudes whose squares overflow), every scale, minimum and level
// must be bit-identical to eight scalar calls.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/quant/search.h"
#include "core/quant/search_x8.h"

namespace weft::quant {
namespace {

uint32_t search_x8_bits(float v) { return std::bit_cast<uint32_t>(v); }

// Fills one group of n values with a kind of content chosen by `kind`.
void search_x8_fill_group(int kind, int n, std::mt19937& rng, float* g) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  const float scale = std::pow(10.f, std::uniform_real_distribution<float>(-4.f, 2.f)(rng));
  for (int i = 0; i < n; ++i) {
    switch (kind % 10) {
      case 0: g[i] = scale * normal(rng); break;                           // the common case
      case 1: g[i] = scale * unit(rng); break;                             // one-signed, min 0
      case 2: g[i] = -scale * unit(rng); break;                            // one-signed negative
      case 3: g[i] = 0.75f; break;                                         // flat: max == min
      case 4: g[i] = (i % 2 ? -0.0f : 0.0f); break;                        // all zero, signed zeros
      case 5: g[i] = static_cast<float>(static_cast<int>(rng() % 7) - 3); break;  // ties and duplicates
      case 6: g[i] = 1e-20f * normal(rng); break;                          // below ggml's group epsilon
      case 7: g[i] = (i == 3 ? 1e30f : scale * normal(rng)); break;        // squares overflow to inf
      case 8: g[i] = (i == 0 ? -2.f : 0.f); break;                          // one outlier
      default: g[i] = std::ldexp(normal(rng), static_cast<int>(rng() % 40) - 20); break;  // wide exponents
    }
  }
}

struct SearchX8Case {
  int n, nmax;
  float rmin, rdelta;
  int nstep;
  bool use_mad;
};

void search_x8_check_qkx2(const SearchX8Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(8 * c.n), w(8 * c.n);
  for (int g = 0; g < 8; ++g) search_x8_fill_group(static_cast<int>(rng() % 10), c.n, rng, x.data() + g * c.n);
  for (int i = 0; i < 8 * c.n; ++i) w[i] = std::fabs(x[i]) + (rng() % 3 == 0 ? 0.f : 0.01f * (rng() % 100));
  std::vector<uint8_t> L(8 * c.n, 0xAA), want_L(8 * c.n, 0x55);
  float scales[8], neg_mins[8];
  make_qkx2_quants_x8(c.n, c.nmax, x.data(), w.data(), L.data(), scales, neg_mins, c.rmin, c.rdelta, c.nstep,
                      c.use_mad);
  for (int g = 0; g < 8; ++g) {
    uint8_t laux[kMaxGroupX8];
    float want_min = 0;
    const float want = make_qkx2_quants(c.n, c.nmax, x.data() + g * c.n, w.data() + g * c.n, want_L.data() + g * c.n,
                                        &want_min, laux, c.rmin, c.rdelta, c.nstep, c.use_mad);
    ASSERT_EQ(search_x8_bits(scales[g]), search_x8_bits(want)) << "seed " << seed << " group " << g;
    ASSERT_EQ(search_x8_bits(neg_mins[g]), search_x8_bits(want_min)) << "seed " << seed << " group " << g;
  }
  ASSERT_EQ(L, want_L) << "seed " << seed;
}

TEST(QuantSearchX8, Qkx2MatchesTheScalarSearchForEveryKQuant) {
  const SearchX8Case cases[] = {
      {32, 15, -1.f, 0.1f, 20, false},   // q4_K
      {32, 31, -0.5f, 0.1f, 15, false},  // q5_K
      {16, 3, -0.5f, 0.1f, 15, true},    // q2_K
      {32, 15, -1.f, 0.1f, 0, false},    // no search steps
  };
  for (const SearchX8Case& c : cases)
    for (uint32_t seed = 1; seed <= 1500; ++seed) {
      search_x8_check_qkx2(c, seed * 7919u + static_cast<uint32_t>(c.nmax));
      if (HasFatalFailure()) return;
    }
}

TEST(QuantSearchX8, QxMatchesTheScalarSearch) {
  for (const int n : {16, 32}) {
    for (uint32_t seed = 1; seed <= 3000; ++seed) {
      std::mt19937 rng(seed);
      std::vector<float> x(8 * n);
      for (int g = 0; g < 8; ++g) search_x8_fill_group(static_cast<int>(rng() % 10), n, rng, x.data() + g * n);
      std::vector<int8_t> L(8 * n, 0x2A), want_L(8 * n, 0x15);
      float scales[8];
      make_qx_quants_x8(n, 32, x.data(), L.data(), scales);
      for (int g = 0; g < 8; ++g) {
        const float want = make_qx_quants(n, 32, x.data() + g * n, want_L.data() + g * n);
        ASSERT_EQ(search_x8_bits(scales[g]), search_x8_bits(want)) << "n " << n << " seed " << seed << " group " << g;
      }
      ASSERT_EQ(L, want_L) << "n " << n << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace weft::quant
