// The quantized dot products (qdot.h) at each SIMD level (simd_levels.h: a
// level this CPU lacks is a reported skip; the AVX2 instances also check the
// generic kernels that define the others) against float64 sums, the SIMD
// activation quantizers against the scalar ones, and a product through the
// CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/qdot.h"
#include "simd_levels.h"
#include "weft/backend/backend.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/core/ops.h"

namespace weft::cpu {
namespace {

constexpr DType kQuantTypes[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                 DType::iq4_nl, DType::mxfp4, DType::q2_K, DType::q3_K, DType::q4_K,
                                 DType::q5_K, DType::q6_K, DType::iq4_xs};

bool is_k_type(DType t) {
  return traits(t).block_size == kSuperBlock;
}
ActType act_of(DType t) {
  return is_k_type(t) ? ActType::q8_K : ActType::q8_0;
}

struct Kernel {
  std::string level;
  const QuantDot* dot;
};

// The kernels a test instance of level l checks (simd_levels.h: one level per
// instance, a level this CPU lacks a skip with its reason): at the AVX2
// level, which runs everywhere, the generic kernel that defines the others
// and AVX2's; at the AVX-512 level, its own (or the generic one it serves).
// A CPU with every flag the level needs must be given its table.
std::vector<Kernel> kernels(Level l, DType t) {
  std::vector<Kernel> out;
  if (l == Level::avx2) out.push_back({"generic", &generic_quant_table().by_type[static_cast<int>(t)]});
  const QuantDot* q = quant_dot_for(l, t);
  EXPECT_NE(q, nullptr) << level_test::level_name(l) << " " << dtype_name(t)
                        << ": the quantized kernels are refused on a CPU with every flag they need";
  if (q != nullptr) out.push_back({level_test::level_name(l), q});
  return out;
}

class QuantDotAtLevel : public level_test::LevelTest {
 protected:
  bool needs_vnni() const override { return true; }
};
WEFT_SIMD_LEVELS(QuantDotAtLevel);

using QuantizeFn = void (*)(const float* x, void* xq, int64_t n);

struct Quantizer {
  std::string level;
  QuantizeFn fn;
};

// The SIMD quantizer of level l for activation type a (none where the
// level's table has none of its own).
std::vector<Quantizer> simd_quantizers(Level l, ActType a) {
  std::vector<Quantizer> out;
  const QuantDotTable& t = l == Level::avx2 ? avx2_quant_table() : avx512_quant_table();
  const QuantizeFn fn = a == ActType::q8_0 ? t.quantize_q8_0 : t.quantize_q8_K;
  if (fn != nullptr) out.push_back({level_test::level_name(l), fn});
  return out;
}

QuantizeFn scalar_quantizer(ActType a) {
  const QuantDotTable& g = generic_quant_table();
  return a == ActType::q8_0 ? g.quantize_q8_0 : g.quantize_q8_K;
}

int act_block(ActType a) {
  return a == ActType::q8_0 ? kQuantBlock : kSuperBlock;
}

std::vector<float> randoms(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// The values an activation row stands for: d * q per block.
std::vector<double> decode_act(ActType a, const uint8_t* xq, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / act_block(a); ++b) {
    double d;
    const int8_t* q;
    if (a == ActType::q8_0) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(xq) + b;
      d = f16_to_f32(blk->d);
      q = blk->q;
    } else {
      const auto* blk = reinterpret_cast<const BlockQ8K*>(xq) + b;
      d = blk->d;
      q = blk->qs;
    }
    for (int i = 0; i < act_block(a); ++i) out[b * act_block(a) + i] = d * q[i];
  }
  return out;
}

// Bound on |x - x^| per element of each block. q = round(x / d) with
// d = amax / 127 leaves |x - d q| <= d / 2; q8_0 stores d as an f16 (relative
// error <= 2^-11 in the normal range) and multiplies it with |q| <= 127, so
// |x - f16(d) q| <= d (1/2 + 127 / 2048). q8_K keeps d in f32. The 1e-4 covers
// the f32 roundings of the scale and of x / d.
std::vector<double> act_error_bound(ActType a, const float* x, int64_t n) {
  const int block = act_block(a);
  const double per_d = a == ActType::q8_0 ? 0.5 + 127.0 / 2048 + 1e-4 : 0.5 + 1e-4;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / block; ++b) {
    double amax = 0;
    for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[b * block + i])));
    for (int i = 0; i < block; ++i) out[b * block + i] = amax / 127 * per_d;
  }
  return out;
}

// One tile's operands: 4 weight rows spaced `stride` bytes (not a multiple of
// 4 past the row), 4 activation rows at odd (but legal) alignments. The
// bytes between rows are 0xFF (as f16, a NaN): a kernel that reads a row's
// tail on into them (the AVX-512 32-value kernels do, within the tile) must
// let nothing of them through.
struct DotOperands {
  int64_t n = 0;
  size_t stride = 0;
  std::vector<uint8_t> w_raw;
  std::vector<std::vector<float>> w;  // decoded, per row
  std::vector<std::vector<float>> x;  // unquantized, per column
  std::vector<std::vector<uint8_t>> xq_buf;
  const void* xq[kTileCols] = {};
};

DotOperands make_dot_operands(DType t, int64_t n, uint32_t seed) {
  DotOperands o;
  o.n = n;
  const size_t row = row_bytes(t, n);
  o.stride = row + 34;
  o.w_raw.assign(o.stride * kTileRows, 0xFF);
  for (int r = 0; r < kTileRows; ++r) {
    // Rows of different magnitudes; the last one with a bias, which exercises
    // the minimums of q4_1, q5_1, q2_K, q4_K and q5_K.
    std::vector<float> f = randoms(n, seed * 7 + r, -1.0f, 1.0f);
    for (float& v : f) v = v * static_cast<float>(r + 1) + (r == kTileRows - 1 ? 0.7f : 0.0f);
    from_f32(t, f.data(), o.w_raw.data() + r * o.stride, n);
    o.w.emplace_back(static_cast<size_t>(n));
    to_f32(t, o.w_raw.data() + r * o.stride, o.w.back().data(), n);
  }
  const ActType a = act_of(t);
  const size_t offset = a == ActType::q8_0 ? 2 : 4;  // BlockQ8_0 / BlockQ8K alignment, not a vector's
  for (int j = 0; j < kTileCols; ++j) {
    o.x.push_back(randoms(n, seed * 13 + j, -1.0f - j, 1.0f));
    o.xq_buf.emplace_back(act_row_bytes(a, n) + offset);
    scalar_quantizer(a)(o.x[j].data(), o.xq_buf[j].data() + offset, n);
    o.xq[j] = o.xq_buf[j].data() + offset;
  }
  return o;
}

// Checks every tile shape of every level's kernel for one type and length.
void check_tiles(Level l, DType t, int64_t n, uint32_t seed) {
  const DotOperands o = make_dot_operands(t, n, seed);
  const ActType a = act_of(t);
  // want_q: with the quantized activations the kernels see; the products of
  // integers and scales are exact, so only float summation (relative ~1e-7 of
  // the magnitude) separates them. want: with the original activations, off
  // by at most sum |w_i| * bound_i (act_error_bound).
  double want_q[kTileRows][kTileCols], tol_q[kTileRows][kTileCols];
  double want[kTileRows][kTileCols], tol[kTileRows][kTileCols];
  for (int j = 0; j < kTileCols; ++j) {
    const std::vector<double> xh = decode_act(a, static_cast<const uint8_t*>(o.xq[j]), n);
    const std::vector<double> e = act_error_bound(a, o.x[j].data(), n);
    for (int r = 0; r < kTileRows; ++r) {
      double s = 0, s_q = 0, mag = 0, err = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double w = o.w[r][i];
        s += w * o.x[j][i];
        s_q += w * xh[i];
        mag += std::fabs(w * xh[i]);
        err += std::fabs(w) * e[i];
      }
      want_q[r][j] = s_q;
      tol_q[r][j] = 1e-5 * mag + 1e-30;
      want[r][j] = s;
      tol[r][j] = err + tol_q[r][j];
    }
  }
  for (const Kernel& k : kernels(l, t)) {
    ASSERT_NE(k.dot->tile, nullptr) << k.level << " " << dtype_name(t);
    ASSERT_EQ(k.dot->act, a) << k.level << " " << dtype_name(t);
    const std::string what = k.level + " " + std::string(dtype_name(t)) + " n=" + std::to_string(n);
    for (int nw = 1; nw <= kTileRows; ++nw)
      for (int nx = 1; nx <= kTileCols; ++nx) {
        float out[kTileRows * kTileCols];
        std::fill(out, out + kTileRows * kTileCols, NAN);
        k.dot->tile(o.w_raw.data(), o.stride, nw, o.xq, nx, n, out);
        for (int r = 0; r < kTileRows; ++r)
          for (int j = 0; j < kTileCols; ++j) {
            const float got = out[r * kTileCols + j];
            const std::string at = what + " tile " + std::to_string(nw) + "x" + std::to_string(nx) + " [" +
                                   std::to_string(r) + "," + std::to_string(j) + "]";
            if (r < nw && j < nx) {
              EXPECT_NEAR(got, want_q[r][j], tol_q[r][j]) << at << " vs quantized x";
              EXPECT_NEAR(got, want[r][j], tol[r][j]) << at << " vs x";
            } else {
              EXPECT_TRUE(std::isnan(got)) << at << " written outside the tile";
            }
          }
      }
  }
}

TEST_P(QuantDotAtLevel, EveryTypeHasAKernel) {
  ASSERT_NE(dot_kernels_for(Level::avx2), nullptr);
  for (DType t : kQuantTypes) {
    ASSERT_NE(quant_dot(t), nullptr) << dtype_name(t);
    EXPECT_EQ(quant_dot(t)->act, act_of(t)) << dtype_name(t);
    for (const Kernel& k : kernels(level(), t))
      EXPECT_EQ(k.dot->act, act_of(t)) << k.level << " " << dtype_name(t);
    // The AVX2 level has its own kernel for every type.
    EXPECT_NE(avx2_quant_table().by_type[static_cast<int>(t)].tile, nullptr) << dtype_name(t);
  }
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32}) EXPECT_EQ(quant_dot(t), nullptr);
}

TEST_P(QuantDotAtLevel, TilesOf32ValueTypes) {
  for (DType t : kQuantTypes) {
    if (is_k_type(t)) continue;
    for (int64_t n : {32, 64, 96, 256, 352, 4352})
      check_tiles(level(), t, n, static_cast<uint32_t>(n + 100 * static_cast<int>(t)));
  }
}

TEST_P(QuantDotAtLevel, TilesOfSuperBlockTypes) {
  for (DType t : kQuantTypes) {
    if (!is_k_type(t)) continue;
    for (int64_t n : {256, 512, 768, 4352})
      check_tiles(level(), t, n, static_cast<uint32_t>(n + 100 * static_cast<int>(t)));
  }
}

// A row's product does not depend on the tile it is computed in: the same
// weight row against the same activation row gives the same float, bit for
// bit, whatever the tile's shape (so a request batched with others gets
// the logits, and the text, it gets alone). Lengths with an odd number of
// blocks or super-blocks included.
TEST_P(QuantDotAtLevel, ARowsProductDoesNotDependOnTheTileShape) {
  for (DType t : kQuantTypes) {
    const std::vector<int64_t> lengths =
        is_k_type(t) ? std::vector<int64_t>{256, 768, 1024} : std::vector<int64_t>{32, 96, 256, 352, 4096};
    for (int64_t n : lengths) {
      const DotOperands o = make_dot_operands(t, n, static_cast<uint32_t>(n + 7 * static_cast<int>(t)));
      for (const Kernel& k : kernels(level(), t)) {
        float whole[kTileRows * kTileCols];
        k.dot->tile(o.w_raw.data(), o.stride, kTileRows, o.xq, kTileCols, n, whole);
        for (int nw = 1; nw <= kTileRows; ++nw)
          for (int nx = 1; nx <= kTileCols; ++nx) {
            float out[kTileRows * kTileCols];
            k.dot->tile(o.w_raw.data(), o.stride, nw, o.xq, nx, n, out);
            for (int r = 0; r < nw; ++r)
              for (int j = 0; j < nx; ++j) {
                const float got = out[r * kTileCols + j], want = whole[r * kTileCols + j];
                EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                    << k.level << " " << dtype_name(t) << " n=" << n << " tile " << nw << "x" << nx << " [" << r << ","
                    << j << "]: " << got << " against " << want << " in the 4x4 tile";
              }
          }
      }
    }
  }
}

// The SIMD quantizers write the scalar ones' bytes for rows of n values.
void expect_same_bytes(Level l, ActType a, const std::vector<float>& x, const std::string& what) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> want(act_row_bytes(a, n), 0xAB);
  scalar_quantizer(a)(x.data(), want.data(), n);
  for (const Quantizer& q : simd_quantizers(l, a)) {
    std::vector<uint8_t> got(want.size(), 0xCD);
    q.fn(x.data(), got.data(), n);
    EXPECT_EQ(got, want) << q.level << (a == ActType::q8_0 ? " q8_0 " : " q8_K ") << what;
  }
}

TEST_P(QuantDotAtLevel, SimdQuantizersMatchScalarOnRandomRows) {
  for (ActType a : {ActType::q8_0, ActType::q8_K}) {
    EXPECT_FALSE(simd_quantizers(level(), a).empty());
    uint32_t seed = 1;
    for (int64_t blocks : {1, 2, 3, 17})
      for (float scale : {1e-3f, 1.0f, 300.0f, 7e4f}) {
        std::vector<float> x = randoms(blocks * act_block(a), ++seed, -scale, scale);
        expect_same_bytes(level(), a, x, "random scale " + std::to_string(scale));
        // Every value on a q grid point and half-way points: ties.
        std::mt19937 rng(seed);
        for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 255) - 127) * 0.5f;
        expect_same_bytes(level(), a, x, "half steps");
      }
  }
}

TEST_P(QuantDotAtLevel, SimdQuantizersMatchScalarOnSpecialBlocks) {
  for (ActType a : {ActType::q8_0, ActType::q8_K}) {
    const int block = act_block(a);
    std::vector<std::vector<float>> cases;
    cases.emplace_back(block, 0.0f);
    cases.emplace_back(block, -0.0f);
    cases.emplace_back(block, 0.3f);
    cases.emplace_back(block, -1e-20f);
    // Ties at scale 1: the largest magnitude is 127, the rest k + 0.5,
    // rounded half to even (nearbyint and _mm256_round_ps alike).
    for (float top : {127.0f, -127.0f}) {
      std::vector<float> x(block);
      for (int i = 0; i < block; ++i) x[i] = static_cast<float>(i % 254 - 127) + 0.5f;
      x[block / 2] = top;
      cases.push_back(x);
    }
    // The same magnitude with both signs: the first one found decides q8_K's sign.
    for (float first : {1.0f, -1.0f}) {
      std::vector<float> x = randoms(block, 5, -0.5f, 0.5f);
      x[3] = first;
      x[block - 2] = -first;
      cases.push_back(x);
    }
    // Tiny blocks: f16 scales that underflow, f32 subnormals.
    for (float tiny : {1e-6f, 1e-9f, 1e-40f, std::numeric_limits<float>::denorm_min()}) {
      std::vector<float> x = randoms(block, 9, -tiny, tiny);
      x[0] = tiny;
      cases.push_back(x);
    }
    for (size_t c = 0; c < cases.size(); ++c)
      expect_same_bytes(level(), a, cases[c], "special case " + std::to_string(c));
  }
}

// Infinities and NaNs: defined (if unspecified) quants, no undefined
// behaviour (UBSan builds), the row's finite blocks unaffected, and the
// kernels run over the result.
TEST_P(QuantDotAtLevel, NonFiniteActivationsAreDefined) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (ActType a : {ActType::q8_0, ActType::q8_K}) {
    const int block = act_block(a);
    std::vector<float> x = randoms(6 * block, 11, -2.0f, 2.0f);
    x[0] = inf;                                                    // block 0: one +inf
    x[block + 1] = -inf;                                           // block 1: one -inf
    x[2 * block + 2] = nan;                                        // block 2: one NaN
    std::fill(x.begin() + 3 * block, x.begin() + 4 * block, nan);  // block 3: all NaN
    x[4 * block] = nan;                                            // block 4: NaN and inf
    x[4 * block + 5] = -inf;
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> want(act_row_bytes(a, n));
    scalar_quantizer(a)(x.data(), want.data(), n);
    const size_t unit = act_row_bytes(a, block);
    for (const Quantizer& q : simd_quantizers(level(), a)) {
      std::vector<uint8_t> got(want.size());
      q.fn(x.data(), got.data(), n);
      // Block 5 is finite.
      EXPECT_EQ(std::memcmp(got.data() + 5 * unit, want.data() + 5 * unit, unit), 0) << q.level;
    }
    for (DType t : kQuantTypes) {
      if (act_of(t) != a) continue;
      std::vector<uint8_t> w(row_bytes(t, n));
      const std::vector<float> wf = randoms(n, 12);
      from_f32(t, wf.data(), w.data(), n);
      const void* xs[1] = {want.data()};
      for (const Kernel& k : kernels(level(), t)) {
        float out[kTileRows * kTileCols];
        k.dot->tile(w.data(), 0, 1, xs, 1, n, out);
      }
    }
  }
}

// mxfp4's E8M0 scales over their range, subnormal ones (e = 0, 1) included:
// random codes under one exponent per weight row, against the float64 sum
// of (level / 2) * 2^(e - 127) * d_x * q_x. Activations whose scale is 1
// keep every product a normal float; the tolerance is relative only, as the
// sums with e near 0 are ~1e-35.
TEST_P(QuantDotAtLevel, Mxfp4ScalesOfEveryExponent) {
  constexpr int kHalfLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};  // 2 * E2M1
  constexpr int64_t n = 4128;  // 129 blocks: AVX-512 chunks of 16 and a tail
  const std::vector<float> xf = randoms(n, 31, -127.0f, 127.0f);
  std::vector<float> xr(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) xr[i] = std::nearbyint(xf[i]);
  for (int64_t b = 0; b < n / 32; ++b) xr[32 * b + b % 32] = b % 2 ? 127.0f : -127.0f;  // d_x = 1
  std::vector<uint8_t> xq(act_row_bytes(ActType::q8_0, n));
  scalar_quantizer(ActType::q8_0)(xr.data(), xq.data(), n);
  const std::vector<double> xv = decode_act(ActType::q8_0, xq.data(), n);
  for (const std::vector<int>& exps : {std::vector<int>{0, 1, 2, 3}, std::vector<int>{126, 127, 128, 220}}) {
    const size_t row = row_bytes(DType::mxfp4, n);
    std::vector<uint8_t> w(row * kTileRows);
    std::mt19937 rng(static_cast<uint32_t>(exps[0] + 5));
    double want[kTileRows], mag[kTileRows];
    for (int r = 0; r < kTileRows; ++r) {
      want[r] = mag[r] = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        uint8_t* blk = w.data() + r * row + b * 17;
        blk[0] = static_cast<uint8_t>(exps[r]);
        for (int j = 0; j < 16; ++j) blk[1 + j] = static_cast<uint8_t>(rng());
        for (int j = 0; j < 32; ++j) {
          const int code = j < 16 ? blk[1 + j] & 0xF : blk[1 + j - 16] >> 4;
          const double v = std::ldexp(kHalfLevels[code] / 2.0, exps[r] - 127) * xv[32 * b + j];
          want[r] += v;
          mag[r] += std::fabs(v);
        }
      }
    }
    const void* xs[1] = {xq.data()};
    for (const Kernel& k : kernels(level(), DType::mxfp4)) {
      float out[kTileRows * kTileCols];
      k.dot->tile(w.data(), row, kTileRows, xs, 1, n, out);
      for (int r = 0; r < kTileRows; ++r) {
        EXPECT_NEAR(out[r * kTileCols], want[r], 1e-5 * mag[r]) << k.level << " e=" << exps[r];
        EXPECT_GT(std::fabs(want[r]), 0.0);
      }
    }
  }
}

// The engine around the kernels: odd row and column counts, quantized
// activations shared between threads.
TEST(QuantDot, MulMatThroughCpuBackend) {
  constexpr int64_t kK = 512, kM = 13, kN = 6;
  auto device = make_cpu_device(3);
  auto backend = device->create_backend();
  for (DType t : kQuantTypes) {
    Context ctx;
    Tensor* w = ctx.new_tensor(t, {kK, kM});
    Tensor* x = ctx.new_tensor(DType::f32, {kK, kN});
    Tensor* y = ops::mul_mat(ctx, w, x);
    Graph graph;
    graph.expand(y);
    Tensor* const all[] = {w, x, y};
    auto buffer = allocate_tensors(device->default_buffer_type(), all);
    const std::vector<float> wf = randoms(kK * kM, 21 + static_cast<uint32_t>(t));
    std::vector<uint8_t> wq(row_bytes(t, kK) * kM);
    from_f32(t, wf.data(), wq.data(), kK * kM);
    std::vector<float> wd(wf.size());
    to_f32(t, wq.data(), wd.data(), kK * kM);
    const std::vector<float> xf = randoms(kK * kN, 22);
    tensor_set(*w, wq.data(), 0, wq.size());
    tensor_set(*x, xf.data(), 0, xf.size() * sizeof(float));
    backend->compute(graph);
    backend->synchronize();
    std::vector<float> got(kM * kN);
    tensor_get(*y, got.data(), 0, got.size() * sizeof(float));
    for (int64_t j = 0; j < kN; ++j) {
      const std::vector<double> e = act_error_bound(act_of(t), xf.data() + j * kK, kK);
      for (int64_t m = 0; m < kM; ++m) {
        double s = 0, tol = 0;
        for (int64_t i = 0; i < kK; ++i) {
          const double wv = wd[m * kK + i];
          s += wv * xf[j * kK + i];
          tol += std::fabs(wv) * (e[i] + 1e-5 * std::fabs(xf[j * kK + i]));
        }
        EXPECT_NEAR(got[j * kM + m], s, tol) << dtype_name(t) << " [" << m << "," << j << "]";
      }
    }
  }
}

}  // namespace
}  // namespace weft::cpu
