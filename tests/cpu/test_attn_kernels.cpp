// The attention inner loops (src/backend/cpu/attn_kernels.h) at each SIMD
// level (simd_levels.h: a level this CPU lacks is a reported skip), against
// scalar float64 code written here: the row
// conversions and key transposes exact per row type (f32, f16, q8_0), the dot-product and
// transposed scores and the value sums within f32 rounding, for 1 to 8
// heads, head sizes with and without tails, masked rows and partial tiles.
// The conformance suite runs the whole op at the level the CPU picks; this
// covers the other level too (AVX2 on an AVX-512 machine).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attn_kernels.h"
#include "simd_levels.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

// One level per test instance (simd_levels.h): the level's kernels, which a
// CPU with every flag the level needs must be given.
class AttnKernelsLevelTest : public level_test::LevelTest {
 protected:
  std::vector<const AttnKernels*> levels() const {
    const AttnKernels* k = attn_kernels_for(level());
    EXPECT_NE(k, nullptr) << "the " << level_test::level_name(level())
                          << " attention kernels are refused on a CPU that has every flag they need";
    if (k == nullptr) return {};
    return {k};
  }
};

class AttnKernelsAtLevel : public AttnKernelsLevelTest {};
WEFT_SIMD_LEVELS(AttnKernelsAtLevel);

// n random rows of d values in a cache type, and their exact values.
struct Rows {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<float>> values;
  std::vector<const uint8_t*> ptrs;
};

Rows make_rows(AttnRow type, int64_t n, int64_t d, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const DType dt = type == AttnRow::f32 ? DType::f32 : type == AttnRow::f16 ? DType::f16 : DType::q8_0;
  Rows r;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<float> x(static_cast<size_t>(d));
    for (float& v : x) v = u(rng);
    std::vector<uint8_t> b(row_bytes(dt, d));
    from_f32(dt, x.data(), b.data(), d);
    to_f32(dt, b.data(), x.data(), d);  // what the row holds
    r.bytes.push_back(std::move(b));
    r.values.push_back(std::move(x));
  }
  for (const auto& b : r.bytes) r.ptrs.push_back(b.data());
  return r;
}

const char* row_name(AttnRow t) { return t == AttnRow::f32 ? "f32" : t == AttnRow::f16 ? "f16" : "q8_0"; }

TEST_P(AttnKernelsAtLevel, TransposedKeysAreTheRowsExactly) {
  std::mt19937 rng(1);
  for (const AttnKernels* k : levels())
    for (AttnRow t : {AttnRow::f32, AttnRow::f16, AttnRow::q8_0})
      for (int64_t d : {32, 64, 128}) {
        SCOPED_TRACE(std::string(k->name) + " " + row_name(t) + " d=" + std::to_string(d));
        const Rows rows = make_rows(t, kAttnHeadsTile, d, rng);
        std::vector<float> kT(static_cast<size_t>(d * kAttnHeadsTile), NAN);
        k->rows[static_cast<int>(t)].transpose_keys(rows.ptrs.data(), d, kT.data());
        for (int64_t i = 0; i < d; ++i)
          for (int64_t p = 0; p < kAttnHeadsTile; ++p)
            ASSERT_EQ(kT[static_cast<size_t>(i * kAttnHeadsTile + p)], rows.values[static_cast<size_t>(p)][static_cast<size_t>(i)])
                << "i=" << i << " p=" << p;
      }
}

TEST_P(AttnKernelsAtLevel, RowsAsF32AreTheRowsExactly) {
  std::mt19937 rng(5);
  for (const AttnKernels* k : levels())
    for (AttnRow t : {AttnRow::f32, AttnRow::f16, AttnRow::q8_0})
      for (int64_t d : {8, 40, 64, 96}) {  // tails past a vector for f32 and f16
        if (t == AttnRow::q8_0 && d % 32 != 0) continue;
        SCOPED_TRACE(std::string(k->name) + " " + row_name(t) + " d=" + std::to_string(d));
        const Rows rows = make_rows(t, 1, d, rng);
        std::vector<float> out(static_cast<size_t>(d), NAN);
        k->rows[static_cast<int>(t)].to_f32(rows.ptrs[0], out.data(), d);
        EXPECT_EQ(out, rows.values[0]);
      }
}

double dot(const float* a, const std::vector<float>& b, int64_t d) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) s += static_cast<double>(a[i]) * b[static_cast<size_t>(i)];
  return s;
}

// |got - want| within f32 rounding of a sum of d products of values up to 2.
void expect_close(float got, double want, int64_t d) {
  EXPECT_NEAR(got, want, 1e-6 * 4.0 * static_cast<double>(d) + 1e-6 * std::abs(want));
}

TEST_P(AttnKernelsAtLevel, ScoresOfHeadsMatchFloat64) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const AttnKernels* k : levels())
    for (int64_t d : {16, 48, 64, 128}) {
      const Rows keys = make_rows(AttnRow::f32, kAttnHeadsTile, d, rng);
      std::vector<float> kT(static_cast<size_t>(d * kAttnHeadsTile));
      k->rows[static_cast<int>(AttnRow::f32)].transpose_keys(keys.ptrs.data(), d, kT.data());
      for (int nc = 1; nc <= kAttnMaxHeads; ++nc) {
        SCOPED_TRACE(std::string(k->name) + " d=" + std::to_string(d) + " heads=" + std::to_string(nc));
        std::vector<std::vector<float>> q(static_cast<size_t>(nc), std::vector<float>(static_cast<size_t>(d)));
        std::vector<std::vector<float>> s(static_cast<size_t>(nc), std::vector<float>(kAttnHeadsTile, NAN));
        std::vector<const float*> qp;
        std::vector<float*> sp;
        for (auto& row : q) {
          for (float& v : row) v = u(rng);
          qp.push_back(row.data());
        }
        for (auto& row : s) sp.push_back(row.data());
        k->score_heads[nc - 1](qp.data(), kT.data(), d, sp.data());
        for (int c = 0; c < nc; ++c)
          for (int64_t p = 0; p < kAttnHeadsTile; ++p)
            expect_close(s[static_cast<size_t>(c)][static_cast<size_t>(p)],
                         dot(q[static_cast<size_t>(c)].data(), keys.values[static_cast<size_t>(p)], d), d);
      }
    }
}

TEST_P(AttnKernelsAtLevel, DotProductScoresMatchFloat64) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const AttnKernels* k : levels())
    for (int64_t d : {1, 7, 8, 16, 40, 64, 100}) {
      SCOPED_TRACE(std::string(k->name) + " d=" + std::to_string(d));
      const Rows keys = make_rows(AttnRow::f32, kAttnKeyTile, d, rng);
      std::vector<const float*> kt;
      for (const auto& v : keys.values) kt.push_back(v.data());
      std::vector<float> q(static_cast<size_t>(d));
      for (float& v : q) v = u(rng);
      float out[kAttnKeyTile];
      k->score_tile(q.data(), kt.data(), d, out);
      for (int64_t p = 0; p < kAttnKeyTile; ++p) expect_close(out[p], dot(q.data(), keys.values[static_cast<size_t>(p)], d), d);
    }
}

TEST_P(AttnKernelsAtLevel, ValueSumsMatchFloat64AndSkipMaskedRows) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (const AttnKernels* k : levels())
    for (AttnRow t : {AttnRow::f32, AttnRow::f16, AttnRow::q8_0})
      for (int64_t dv : {32, 40, 64, 72}) {
        if (t == AttnRow::q8_0 && dv % 32 != 0) continue;
        for (int nc : {1, 3, 8}) {
          SCOPED_TRACE(std::string(k->name) + " " + row_name(t) + " dv=" + std::to_string(dv) +
                       " heads=" + std::to_string(nc));
          const int64_t j0 = 5, n = 27;  // rows j0 .. j0 + n of the scores and mask
          const Rows v = make_rows(t, n, dv, rng);
          std::vector<float> mask(static_cast<size_t>(j0 + n), 0.0f);
          for (int64_t j = 0; j < j0 + n; j += 4) mask[static_cast<size_t>(j)] = -INFINITY;
          std::vector<std::vector<float>> p(static_cast<size_t>(nc), std::vector<float>(static_cast<size_t>(j0 + n)));
          std::vector<std::vector<float>> acc(static_cast<size_t>(nc), std::vector<float>(static_cast<size_t>(dv)));
          std::vector<float*> pp, ap;
          for (auto& row : p) {
            for (float& x : row) x = u(rng);
            pp.push_back(row.data());
          }
          for (auto& row : acc) {
            for (float& x : row) x = u(rng);
            ap.push_back(row.data());
          }
          std::vector<std::vector<double>> want(static_cast<size_t>(nc), std::vector<double>(static_cast<size_t>(dv)));
          for (int c = 0; c < nc; ++c)
            for (int64_t e = 0; e < dv; ++e) {
              double s = acc[static_cast<size_t>(c)][static_cast<size_t>(e)];
              for (int64_t j = 0; j < n; ++j)
                if (mask[static_cast<size_t>(j0 + j)] != -INFINITY)
                  s += static_cast<double>(p[static_cast<size_t>(c)][static_cast<size_t>(j0 + j)]) *
                       v.values[static_cast<size_t>(j)][static_cast<size_t>(e)];
              want[static_cast<size_t>(c)][static_cast<size_t>(e)] = s;
            }
          k->rows[static_cast<int>(t)].accumulate[nc - 1](pp.data(), v.ptrs.data(), mask.data(), j0, n, dv, ap.data());
          for (int c = 0; c < nc; ++c)
            for (int64_t e = 0; e < dv; ++e)
              expect_close(acc[static_cast<size_t>(c)][static_cast<size_t>(e)],
                           want[static_cast<size_t>(c)][static_cast<size_t>(e)], n);
        }
      }
}

}  // namespace
}  // namespace weft::cpu
