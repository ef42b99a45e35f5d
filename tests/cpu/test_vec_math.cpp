// The vector kernels of vec.h at each SIMD level (simd_levels.h: a level this
// CPU lacks is a reported skip), against float64:
// the transcendental functions over a dense sweep of f32 bit patterns (every
// 1000th, both signs, all magnitudes) plus specials, measured in ulp of the
// exact result; the conversions bit for bit against weft's scalar ones; the
// row helpers (reductions, soft_max pieces, rope rotations, binary ops) on
// every length up to a few vectors, so each tail is covered.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/vec.h"
#include "sanitized.h"
#include "simd_levels.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

// One level per test instance (simd_levels.h): the level's kernels, which a
// CPU with every flag the level needs must be given.
class VecKernelsLevelTest : public level_test::LevelTest {
 protected:
  std::vector<const VecKernels*> levels() const {
    const VecKernels* k = vec_kernels_for(level());
    EXPECT_NE(k, nullptr) << "the " << level_test::level_name(level())
                          << " vector kernels are refused on a CPU that has every flag they need";
    if (k == nullptr) return {};
    return {k};
  }
};

class VecMath : public VecKernelsLevelTest {};
WEFT_SIMD_LEVELS(VecMath);

class VecConvert : public VecKernelsLevelTest {};
WEFT_SIMD_LEVELS(VecConvert);

class VecRows : public VecKernelsLevelTest {};
WEFT_SIMD_LEVELS(VecRows);

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Inputs: every step-th bit pattern (NaNs included), and the specials.
std::vector<float> sweep_inputs() {
  const uint32_t step = test::kSanitized ? 7919 : 1000;
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step) xs.push_back(from_bits(static_cast<uint32_t>(b)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f,   1e-45f, 1e-40f, 1.17549435e-38f, 1e-30f, 1e-10f, 1e-7f, 0.5f,    1.0f,   2.0f,
                  9.0f,   9.1f,   14.9f,  15.0f,           20.0f,  40.0f,  87.3f, 88.0f,   88.72f, 88.7228f,
                  88.73f, 89.0f,  100.0f, 103.9f,          104.0f, 150.0f, 1e10f, 3.4e38f, inf,    std::nanf("")}) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  return xs;
}

// |got - want| in units of the last place of want rounded to f32 (2^-149
// for subnormal results). Infinity counts as 2^128, the next value after
// FLT_MAX, so an overflow one ulp early is one ulp.
double ulp_error(float got, double want) {
  const double big = std::ldexp(1.0, 128);
  const double w = std::fabs(want) >= big ? std::copysign(big, want) : want;
  const double g = std::isinf(got) ? std::copysign(big, got) : got;
  const double aw = std::fabs(w);
  const double ulp = aw < std::ldexp(1.0, -126) ? std::ldexp(1.0, -149) : std::ldexp(1.0, std::ilogb(aw) - 23);
  return std::fabs(g - w) / ulp;
}

double sigmoid_ref(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}
// x f(x) with f -> 0 as x -> -inf faster than 1/x: the limit -0 at -inf
// (the formula would give -inf * 0 = NaN).
double times(double x, double f) {
  return std::isinf(x) && x < 0 ? -0.0 : x * f;
}

struct Transcendental {
  const char* name;
  std::function<void(const VecKernels&, const float*, float*, int64_t)> run;
  std::function<double(double)> ref;
  // The bound this test holds (the measured maxima are printed): exp and
  // the sigmoids are f32 arithmetic (the sigmoids compensated); tanh,
  // softcap and gelu_erf are computed in double and rounded once.
  double max_ulp;
};

std::vector<Transcendental> transcendentals() {
  auto gelu_ref = [](double x) {
    const double a = 1.5957691216057308 * (x + 0.044715 * x * x * x);  // 2 sqrt(2/pi) (...)
    return times(x, sigmoid_ref(a));
  };
  return {
      {"exp", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.exp(x, y, n); },
       [](double x) { return std::exp(x); }, 1.0},
      {"tanh", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.tanh(x, y, n); },
       [](double x) { return std::tanh(x); }, 0.6},
      {"sigmoid", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.sigmoid(x, y, n); }, sigmoid_ref,
       1.0},
      {"silu", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.silu(x, y, n); },
       [](double x) { return times(x, sigmoid_ref(x)); }, 1.0},
      {"gelu", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.gelu(x, y, n); }, gelu_ref, 1.2},
      {"gelu_erf", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.gelu_erf(x, y, n); },
       [](double x) { return times(x, 0.5 * std::erfc(-x / std::sqrt(2.0))); }, 0.6},
      {"softcap 30", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.softcap(x, 30.0f, y, n); },
       [](double x) { return 30.0 * std::tanh(x / 30.0); }, 0.6},
      {"softcap 0.7", [](const VecKernels& k, const float* x, float* y, int64_t n) { k.softcap(x, 0.7f, y, n); },
       [](double x) { return 0.7f * std::tanh(x / 0.7f); }, 0.6},
  };
}

TEST_P(VecMath, TranscendentalsWithinUlpOfFloat64OverTheWholeRange) {
  const std::vector<float> xs = sweep_inputs();
  std::vector<float> ys(xs.size());
  for (const VecKernels* k : levels()) {
    for (const Transcendental& f : transcendentals()) {
      f.run(*k, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
      double worst = 0;
      float worst_x = 0;
      int bad = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double want = f.ref(xs[i]);
        const float got = ys[i];
        if (std::isnan(want) != std::isnan(got)) {
          if (bad++ < 5)
            ADD_FAILURE() << k->name << " " << f.name << "(" << xs[i] << ") = " << got << ", want " << want;
          continue;
        }
        if (std::isnan(want)) continue;
        const double e = ulp_error(got, want);
        if (e > worst) worst = e, worst_x = xs[i];
      }
      std::printf("[ vec_math ] %-7s %-12s max %.2f ulp at x = %.9g\n", k->name, f.name, worst, worst_x);
      EXPECT_LE(worst, f.max_ulp) << k->name << " " << f.name << " at x = " << worst_x;
    }
  }
}

// The transcendental results do not depend on where a value sits in the row
// (vector body or tail) nor on whether out is x.
TEST_P(VecMath, TailsAndInPlaceAgreeWithTheVectorBody) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
  for (const VecKernels* k : levels()) {
    for (const Transcendental& f : transcendentals()) {
      for (int64_t n = 0; n <= 70; ++n) {
        std::vector<float> x(static_cast<size_t>(n)), y(x.size()), one(1);
        for (float& v : x) v = dist(rng) * (rng() % 4 == 0 ? 6.0f : 1.0f);  // some lanes in the sigmoids' far tail
        f.run(*k, x.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          f.run(*k, &x[static_cast<size_t>(i)], one.data(), 1);
          ASSERT_EQ(bits_of(one[0]), bits_of(y[static_cast<size_t>(i)])) << k->name << " " << f.name << " n " << n;
        }
        f.run(*k, x.data(), x.data(), n);
        ASSERT_EQ(x, y) << k->name << " " << f.name << " in place, n " << n;
      }
    }
  }
}

// ------------------------------------------------------------ conversions

TEST_P(VecConvert, F16ToF32EveryPatternBitExact) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> f(h.size());
  for (const VecKernels* k : levels()) {
    k->f16_to_f32(h.data(), f.data(), static_cast<int64_t>(h.size()));
    for (uint32_t i = 0; i < 65536; ++i)
      ASSERT_EQ(bits_of(f[i]), bits_of(f16_to_f32(h[i]))) << k->name << " f16 0x" << std::hex << i;
    k->bf16_to_f32(h.data(), f.data(), static_cast<int64_t>(h.size()));
    for (uint32_t i = 0; i < 65536; ++i)
      ASSERT_EQ(bits_of(f[i]), bits_of(bf16_to_f32(h[i]))) << k->name << " bf16 0x" << std::hex << i;
  }
}

TEST_P(VecConvert, F32ToHalfBitExact) {
  // Every 997th pattern, and every pattern near the f16 and bf16 rounding
  // points of a few binades (ties, +-1 around them), subnormals and NaNs.
  std::vector<float> xs;
  const uint32_t step = test::kSanitized ? 9973 : 997;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step) xs.push_back(from_bits(static_cast<uint32_t>(b)));
  for (uint32_t base : {0x00000000u, 0x33000000u, 0x387FC000u, 0x38800000u, 0x3F800000u, 0x477FE000u, 0x7F7F0000u,
                        0x7F800000u, 0x7FC00000u}) {
    for (uint32_t off = 0; off < 0x10000; off += 0x0FFF) {
      for (uint32_t d : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x7FFFu, 0x8000u, 0x8001u}) {
        xs.push_back(from_bits(base + off + d));
        xs.push_back(from_bits((base + off + d) | 0x80000000u));
      }
    }
  }
  std::vector<uint16_t> h(xs.size());
  for (const VecKernels* k : levels()) {
    k->f32_to_f16(xs.data(), h.data(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(h[i], f32_to_f16(xs[i])) << k->name << " f16 of 0x" << std::hex << bits_of(xs[i]);
    k->f32_to_bf16(xs.data(), h.data(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(h[i], f32_to_bf16(xs[i])) << k->name << " bf16 of 0x" << std::hex << bits_of(xs[i]);
  }
}

TEST_P(VecConvert, EveryLengthWritesExactlyItsValues) {
  for (const VecKernels* k : levels()) {
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i) - 3.0f;
      std::vector<uint16_t> h(x.size() + 1, 0xABCD);
      std::vector<float> back(x.size() + 1, 7.0f);
      k->f32_to_f16(x.data(), h.data(), n);
      k->f16_to_f32(h.data(), back.data(), n);
      EXPECT_EQ(h[static_cast<size_t>(n)], 0xABCD) << k->name << " f16 wrote past n = " << n;
      EXPECT_EQ(back[static_cast<size_t>(n)], 7.0f) << k->name << " f32 wrote past n = " << n;
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(back[i], f16_to_f32(f32_to_f16(x[i])));
      k->f32_to_bf16(x.data(), h.data(), n);
      k->bf16_to_f32(h.data(), back.data(), n);
      EXPECT_EQ(h[static_cast<size_t>(n)], 0xABCD) << k->name << " bf16 wrote past n = " << n;
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(back[i], bf16_to_f32(f32_to_bf16(x[i])));
    }
  }
}

// ------------------------------------------------------------ row helpers

std::vector<float> randoms(int64_t n, std::mt19937& rng, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<int64_t> lengths() {
  std::vector<int64_t> out;
  for (int64_t n = 0; n <= 67; ++n) out.push_back(n);
  out.push_back(1027);
  return out;
}

TEST_P(VecRows, ReductionsMatchFloat64) {
  std::mt19937 rng(11);
  for (const VecKernels* k : levels()) {
    for (int64_t n : lengths()) {
      std::vector<float> x = randoms(n, rng);
      for (float& v : x) v += 1000.0f;  // a large mean: sum_sq_dev must not lose the deviations
      double sum = 0, sq = 0;
      for (float v : x) sum += v, sq += static_cast<double>(v) * v;
      const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
      double dev = 0;
      for (float v : x) dev += (v - mean) * (v - mean);
      EXPECT_NEAR(k->sum(x.data(), n), sum, 1e-12 * std::fabs(sum) + 1e-300) << k->name << " n " << n;
      EXPECT_NEAR(k->sum_sq(x.data(), n), sq, 1e-12 * sq + 1e-300) << k->name << " n " << n;
      EXPECT_NEAR(k->sum_sq_dev(x.data(), mean, n), dev, 1e-6 * dev + 1e-300) << k->name << " n " << n;
      std::vector<float> out(x.size());
      k->center_scale(x.data(), mean, 0.5f, out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = (x[i] - mean) * 0.5;
        EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-9) << k->name << " n " << n << " i " << i;
      }
    }
  }
}

TEST_P(VecRows, SoftMaxPieces) {
  std::mt19937 rng(12);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (const VecKernels* k : levels()) {
    for (int64_t n : lengths()) {
      const std::vector<float> x = randoms(n, rng, -8.0f, 8.0f);
      std::vector<float> mask = randoms(n, rng);
      for (int64_t i = 0; i < n; i += 3) mask[i] = ninf;
      for (const float* m : {static_cast<const float*>(nullptr), static_cast<const float*>(mask.data())}) {
        std::vector<float> w(x.size());
        const float mx = k->scale_add_max(x.data(), 0.3f, m, w.data(), n);
        float want_max = ninf;
        for (int64_t i = 0; i < n; ++i) {
          const float want = m ? std::fma(x[i], 0.3f, m[i]) : x[i] * 0.3f;
          ASSERT_EQ(w[i], want) << k->name << " n " << n;
          want_max = std::max(want_max, want);
        }
        ASSERT_EQ(mx, want_max) << k->name << " n " << n;
        if (n == 0 || mx == ninf) continue;  // soft_max gives zeros without calling exp_sum
        std::vector<float> e(x.size());
        const double s = k->exp_sum(w.data(), mx, e.data(), n);
        double want_sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double want = std::exp(static_cast<double>(w[i] - mx));  // the difference is taken in f32
          want_sum += e[i];
          EXPECT_LE(ulp_error(e[i], want), 1.0) << k->name << " n " << n << " i " << i;
        }
        EXPECT_NEAR(s, want_sum, 1e-12 * want_sum) << k->name << " n " << n;
      }
    }
    // NaN is ignored by the max (as the scalar loop did); all -inf gives -inf.
    const float row[3] = {ninf, std::nanf(""), ninf};
    float out[3];
    EXPECT_EQ(k->scale_add_max(row, 1.0f, nullptr, out, 3), ninf);
  }
}

TEST_P(VecRows, RopeRotations) {
  std::mt19937 rng(13);
  for (const VecKernels* k : levels()) {
    for (int64_t half : {0, 1, 3, 4, 8, 9, 16, 17, 33, 64}) {
      const int64_t n = 2 * half;
      const std::vector<float> x = randoms(n, rng), c0 = randoms(half, rng), s0 = randoms(half, rng);
      std::vector<float> c(x.size()), s(x.size()), out(x.size());
      for (int64_t i = 0; i < half; ++i) c[2 * i] = c[2 * i + 1] = c0[i], s[2 * i] = s[2 * i + 1] = s0[i];
      k->rope_pairs(x.data(), c.data(), s.data(), out.data(), n);
      for (int64_t i = 0; i < half; ++i) {
        const double a = x[2 * i], b = x[2 * i + 1];
        EXPECT_NEAR(out[2 * i], a * c0[i] - b * s0[i], 1e-6) << k->name << " pairs " << n;
        EXPECT_NEAR(out[2 * i + 1], a * s0[i] + b * c0[i], 1e-6) << k->name << " pairs " << n;
      }
      std::vector<float> o0(static_cast<size_t>(half)), o1(o0.size());
      k->rope_halves(x.data(), x.data() + half, c0.data(), s0.data(), o0.data(), o1.data(), half);
      for (int64_t i = 0; i < half; ++i) {
        const double a = x[i], b = x[half + i];
        EXPECT_NEAR(o0[i], a * c0[i] - b * s0[i], 1e-6) << k->name << " halves " << half;
        EXPECT_NEAR(o1[i], a * s0[i] + b * c0[i], 1e-6) << k->name << " halves " << half;
      }
    }
  }
}

TEST_P(VecRows, BinaryScaleAndSwiglu) {
  std::mt19937 rng(14);
  for (const VecKernels* k : levels()) {
    for (int64_t n : lengths()) {
      const std::vector<float> x = randoms(n, rng), y = randoms(n, rng, 0.5f, 1.5f);
      std::vector<float> out(x.size());
      for (int op = 0; op < 4; ++op) {
        auto f = [op](float a, float b) { return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b; };
        k->binary[op](x.data(), y.data(), out.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], f(x[i], y[i])) << k->name << " op " << op;
        k->binary_scalar[op](x.data(), 0.75f, out.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], f(x[i], 0.75f)) << k->name << " scalar op " << op;
      }
      k->scale(x.data(), -2.5f, out.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] * -2.5f);
      k->sqr(x.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] * x[i]);
      k->sqrt(y.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], std::sqrt(y[i]));
      k->swiglu(x.data(), y.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[i] * sigmoid_ref(x[i]) * y[i];
        EXPECT_LE(ulp_error(out[i], want), 1.5) << k->name << " swiglu n " << n;  // silu, then * y
      }
    }
  }
}

}  // namespace
}  // namespace weft::cpu
