// Tests of the conformance reference on hand-computed examples, so that the
// suite's expected values are not trusted blindly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "conformance/reference.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> i32_bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Loads each (tensor, bytes), runs the graph of out, returns out's values.
std::vector<double> run(Tensor* out, const std::vector<std::pair<Tensor*, std::vector<uint8_t>>>& leafs) {
  Graph g;
  g.expand(out);
  Reference ref;
  for (const auto& [t, bytes] : leafs) ref.load_leaf(*t, bytes.data(), bytes.size());
  ref.run(g);
  return ref.values(*out);
}

TEST(ConformanceReference, DecodesF16) {
  EXPECT_EQ(decode_f16(0x3C00), 1.0);
  EXPECT_EQ(decode_f16(0xC000), -2.0);
  EXPECT_EQ(decode_f16(0x0001), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(decode_f16(0x03FF), 1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(decode_f16(0x0400), std::ldexp(1.0, -14));  // smallest normal
  EXPECT_EQ(decode_f16(0x7BFF), 65504.0);
  EXPECT_EQ(decode_f16(0x3555), 0.333251953125);
  EXPECT_TRUE(std::signbit(decode_f16(0x8000)));
  EXPECT_EQ(decode_f16(0x7C00), INFINITY);
  EXPECT_EQ(decode_f16(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(decode_f16(0x7E00)));
}

TEST(ConformanceReference, DecodesBF16) {
  EXPECT_EQ(decode_bf16(0x3F80), 1.0);
  EXPECT_EQ(decode_bf16(0xC000), -2.0);
  EXPECT_EQ(decode_bf16(0x3FC0), 1.5);
  EXPECT_EQ(decode_bf16(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(decode_bf16(0xFF80), -INFINITY);
}

TEST(ConformanceReference, DecodesQ8_0) {
  uint8_t block[34] = {};
  block[0] = 0x00;
  block[1] = 0x38;  // d = 0.5 (f16 0x3800), little-endian
  const int8_t q[] = {0, 1, -1, 127, -128, 10};
  for (int i = 0; i < 6; ++i) block[2 + i] = static_cast<uint8_t>(q[i]);
  double out[32];
  decode_q8_0(block, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.5);
  EXPECT_EQ(out[2], -0.5);
  EXPECT_EQ(out[3], 63.5);
  EXPECT_EQ(out[4], -64.0);
  EXPECT_EQ(out[5], 5.0);
  EXPECT_EQ(out[31], 0.0);
}

TEST(ConformanceReference, DecodesQ4_0) {
  uint8_t block[18] = {};
  block[0] = 0x00;
  block[1] = 0x40;                                   // d = 2 (f16 0x4000)
  block[2] = 0x1F;                                   // value 0 = (0xF - 8) * 2 = 14, value 16 = (0x1 - 8) * 2 = -14
  block[3] = 0x80;                                   // value 1 = (0 - 8) * 2 = -16, value 17 = (8 - 8) * 2 = 0
  for (int j = 2; j < 16; ++j) block[2 + j] = 0x88;  // zeros
  double out[32];
  decode_q4_0(block, out);
  EXPECT_EQ(out[0], 14.0);
  EXPECT_EQ(out[16], -14.0);
  EXPECT_EQ(out[1], -16.0);
  EXPECT_EQ(out[17], 0.0);
  EXPECT_EQ(out[5], 0.0);
  EXPECT_EQ(out[31], 0.0);
}

TEST(ConformanceReference, DecodesStridedTensor) {
  // A [2, 2] f32 view with a row stride of 3 elements.
  Tensor t;
  t.type = DType::f32;
  t.ne[0] = 2;
  t.ne[1] = 2;
  t.nb[0] = 4;
  t.nb[1] = 12;
  t.nb[2] = t.nb[3] = 24;
  const std::vector<uint8_t> bytes = f32_bytes({1, 2, 99, 3, 4});
  EXPECT_EQ(decode_tensor(t, bytes.data(), bytes.size()), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_THROW(decode_tensor(t, bytes.data(), 16), Error);  // element 4 lies outside 16 bytes
}

TEST(ConformanceReference, MulMat2x2) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {2, 2});  // rows [1, 2] and [3, 4]
  Tensor* b = ctx.new_tensor(DType::f32, {2, 1});  // column [5, 6]
  Tensor* y = ops::mul_mat(ctx, a, b);
  EXPECT_EQ(run(y, {{a, f32_bytes({1, 2, 3, 4})}, {b, f32_bytes({5, 6})}}), (std::vector<double>{17, 39}));
}

TEST(ConformanceReference, MulMatBroadcastsConsecutiveBatches) {
  // a has 2 batches, b 4: b batches 0, 1 use a batch 0; 2, 3 use a batch 1.
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {1, 1, 2});
  Tensor* b = ctx.new_tensor(DType::f32, {1, 1, 4});
  Tensor* y = ops::mul_mat(ctx, a, b);
  EXPECT_EQ(run(y, {{a, f32_bytes({10, 100})}, {b, f32_bytes({1, 2, 3, 4})}}), (std::vector<double>{10, 20, 300, 400}));
}

TEST(ConformanceReference, MulMatQ8_0Weights) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::q8_0, {32, 1});
  Tensor* b = ctx.new_tensor(DType::f32, {32, 1});
  std::vector<uint8_t> block(34, 0);
  block[1] = 0x3C;  // d = 1
  block[2] = 3;
  block[33] = static_cast<uint8_t>(-2);
  std::vector<float> x(32, 0.0f);
  x[0] = 2.0f;
  x[31] = 5.0f;
  EXPECT_EQ(run(ops::mul_mat(ctx, a, b), {{a, block}, {b, f32_bytes(x)}}), (std::vector<double>{3 * 2 - 2 * 5}));
}

TEST(ConformanceReference, RopeRotatesOnePairByItsAngle) {
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::f32, {2, 1, 1});
    Tensor* pos = ctx.new_tensor(DType::i32, {1});
    Tensor* y = ops::rope(ctx, x, pos, 2, mode, 10000.0f);
    // Pair 0 at position 1: angle 1 rad.
    const std::vector<double> v = run(y, {{x, f32_bytes({1, 0})}, {pos, i32_bytes({1})}});
    EXPECT_NEAR(v[0], std::cos(1.0), 1e-15);
    EXPECT_NEAR(v[1], std::sin(1.0), 1e-15);
  }
}

TEST(ConformanceReference, RopePairsAndPassesTheTail) {
  // head_dim 6, n_dims 4, base 100, position 2: pair 0 turns by 2 rad, pair 1
  // by 2 * 100^(-2/4) = 0.2 rad; elements 4 and 5 pass through.
  const double c0 = std::cos(2.0), s0 = std::sin(2.0), c1 = std::cos(0.2), s1 = std::sin(0.2);
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::f32, {6, 1, 1});
    Tensor* pos = ctx.new_tensor(DType::i32, {1});
    const auto v =
        run(ops::rope(ctx, x, pos, 4, RopeMode::normal, 100.0f), {{x, f32_bytes(in)}, {pos, i32_bytes({2})}});
    const std::vector<double> want = {1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1, 5, 6};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-12) << "normal " << i;
  }
  {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::f32, {6, 1, 1});
    Tensor* pos = ctx.new_tensor(DType::i32, {1});
    const auto v = run(ops::rope(ctx, x, pos, 4, RopeMode::neox, 100.0f), {{x, f32_bytes(in)}, {pos, i32_bytes({2})}});
    // neox pairs (0, 2) and (1, 3).
    const std::vector<double> want = {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 1 * s0 + 3 * c0, 2 * s1 + 4 * c1, 5, 6};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-12) << "neox " << i;
  }
}

TEST(ConformanceReference, RopeExtScalesAnglesAndRotatedValuesOnly) {
  // head_dim 6, n_dims 4, base 100, position 2, factors {4, 0.5}, freq_scale
  // 0.5, attn_factor 3: pair 0 turns by 2 * 0.5 / 4 = 0.25 rad, pair 1 by
  // 2 * 0.5 * 0.1 / 0.5 = 0.2 rad; both are tripled; 5 and 6 pass unscaled.
  const double c0 = std::cos(0.25), s0 = std::sin(0.25), c1 = std::cos(0.2), s1 = std::sin(0.2);
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::f32, {6, 1, 1});
    Tensor* pos = ctx.new_tensor(DType::i32, {1});
    Tensor* ff = ctx.new_tensor(DType::f32, {2});
    const auto v = run(ops::rope_ext(ctx, x, pos, ff, 4, mode, 100.0f, {0.5f, 3.0f}),
                       {{x, f32_bytes(in)}, {pos, i32_bytes({2})}, {ff, f32_bytes({4.0f, 0.5f})}});
    const std::vector<double> want =
        mode == RopeMode::normal
            ? std::vector<double>{3 * (1 * c0 - 2 * s0), 3 * (1 * s0 + 2 * c0), 3 * (3 * c1 - 4 * s1),
                                  3 * (3 * s1 + 4 * c1), 5, 6}
            : std::vector<double>{3 * (1 * c0 - 3 * s0), 3 * (2 * c1 - 4 * s1), 3 * (1 * s0 + 3 * c0),
                                  3 * (2 * s1 + 4 * c1), 5, 6};
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-12) << static_cast<int>(mode) << " " << i;
  }
}

TEST(ConformanceReference, RopeExtWithDefaultsIsRope) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {8, 2, 3});
  Tensor* pos = ctx.new_tensor(DType::i32, {3});
  std::vector<float> in(48);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i));
  const std::vector<std::pair<Tensor*, std::vector<uint8_t>>> leafs = {{x, f32_bytes(in)},
                                                                       {pos, i32_bytes({0, 7, 300})}};
  EXPECT_EQ(run(ops::rope_ext(ctx, x, pos, nullptr, 6, RopeMode::neox, 1e4f), leafs),
            run(ops::rope(ctx, x, pos, 6, RopeMode::neox, 1e4f), leafs));
}

TEST(ConformanceReference, SoftMax) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {2, 1});
  const auto v = run(ops::soft_max(ctx, x, nullptr, 1.0f), {{x, f32_bytes({0.0f, std::log(2.0f)})}});
  EXPECT_NEAR(v[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(v[1], 2.0 / 3.0, 1e-7);

  // Scale 2 and an f16 mask: row 0 hides element 1, row 1 hides nothing.
  Context ctx2;
  Tensor* y = ctx2.new_tensor(DType::f32, {2, 2});
  Tensor* m = ctx2.new_tensor(DType::f16, {2, 2});
  const std::vector<uint8_t> mask = {0x00, 0x00, 0x00, 0xFC, 0x00, 0x00, 0x00, 0x00};  // [0, -inf], [0, 0]
  const auto w = run(ops::soft_max(ctx2, y, m, 2.0f), {{y, f32_bytes({1, 5, 0, 0.5f})}, {m, mask}});
  EXPECT_EQ(w[0], 1.0);
  EXPECT_EQ(w[1], 0.0);
  EXPECT_NEAR(w[2], 1.0 / (1.0 + std::exp(1.0)), 1e-15);
  EXPECT_NEAR(w[3], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
}

TEST(ConformanceReference, NormsAndUnaries) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {2, 1});
  const auto r = run(ops::rms_norm(ctx, x, 0.0f), {{x, f32_bytes({3, 4})}});
  EXPECT_NEAR(r[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(r[1], 4 / std::sqrt(12.5), 1e-15);
  const auto n = run(ops::norm(ctx, x, 0.0f), {{x, f32_bytes({3, 5})}});  // mean 4, var 1
  EXPECT_NEAR(n[0], -1.0, 1e-15);
  EXPECT_NEAR(n[1], 1.0, 1e-15);
  const auto g = run(ops::gelu(ctx, x), {{x, f32_bytes({1, -1})}});
  EXPECT_NEAR(g[0], 0.8411919906082768, 1e-12);      // 0.5 (1 + tanh(sqrt(2/pi) * 1.044715))
  EXPECT_NEAR(g[1], 0.8411919906082768 - 1, 1e-12);  // gelu(-x) = gelu(x) - x
  const auto s = run(ops::silu(ctx, x), {{x, f32_bytes({1, 0})}});
  EXPECT_NEAR(s[0], 0.7310585786300049, 1e-15);
  EXPECT_EQ(s[1], 0.0);
  const auto ge = run(ops::gelu_erf(ctx, x), {{x, f32_bytes({1, -2})}});
  EXPECT_NEAR(ge[0], 0.8413447460685429, 1e-15);   // Phi(1)
  EXPECT_NEAR(ge[1], -0.04550026389635842, 1e-15);  // -2 Phi(-2)
  const auto sg = run(ops::sigmoid(ctx, x), {{x, f32_bytes({0, -1})}});
  EXPECT_EQ(sg[0], 0.5);
  EXPECT_NEAR(sg[1], 0.2689414213699951, 1e-15);
  const auto sc = run(ops::softcap(ctx, x, 2.0f), {{x, f32_bytes({2, -1})}});
  EXPECT_NEAR(sc[0], 2 * std::tanh(1.0), 1e-15);
  EXPECT_NEAR(sc[1], 2 * std::tanh(-0.5), 1e-15);
}

TEST(ConformanceReference, SortsKeepTiesInIndexOrder) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {5, 1});
  const auto bytes = f32_bytes({2, 1, 2, 3, 1});
  EXPECT_EQ(run(ops::argsort(ctx, x, SortOrder::ascending), {{x, bytes}}), (std::vector<double>{1, 4, 0, 2, 3}));
  EXPECT_EQ(run(ops::argsort(ctx, x, SortOrder::descending), {{x, bytes}}), (std::vector<double>{3, 0, 2, 1, 4}));
  EXPECT_EQ(run(ops::top_k(ctx, x, 2), {{x, bytes}}), (std::vector<double>{3, 0}));
  EXPECT_EQ(run(ops::argmax(ctx, x), {{x, bytes}}), (std::vector<double>{3}));
  EXPECT_EQ(run(ops::sum_rows(ctx, x), {{x, bytes}}), (std::vector<double>{9}));
}

TEST(ConformanceReference, ViewsAliasTheirSource) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {3, 2});  // rows [1 2 3], [4 5 6]
  Tensor* t = ops::cont(ctx, ops::transpose(ctx, x));
  EXPECT_EQ(run(t, {{x, f32_bytes({1, 2, 3, 4, 5, 6})}}), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  Tensor* v = ops::cont(ctx, ops::view_2d(ctx, x, 2, 2, x->nb[1], 4));  // columns 1..2
  EXPECT_EQ(run(v, {{x, f32_bytes({1, 2, 3, 4, 5, 6})}}), (std::vector<double>{2, 3, 5, 6}));
}

TEST(ConformanceReference, SetRowsWritesOnlyItsRows) {
  Context ctx;
  Tensor* dst = ctx.new_tensor(DType::f32, {2, 3});
  Tensor* src = ctx.new_tensor(DType::f32, {2, 1});
  Tensor* idx = ctx.new_tensor(DType::i32, {1, 1});
  Tensor* w = ops::set_rows(ctx, dst, src, idx);
  Graph g;
  g.expand(w);
  Reference ref;
  const auto d = f32_bytes({1, 2, 3, 4, 5, 6});
  const auto s = f32_bytes({7, 8});
  const auto i = i32_bytes({1});
  ref.load_leaf(*dst, d.data(), d.size());
  ref.load_leaf(*src, s.data(), s.size());
  ref.load_leaf(*idx, i.data(), i.size());
  ref.run(g);
  EXPECT_EQ(ref.values(*dst), (std::vector<double>{1, 2, 7, 8, 5, 6}));
}

TEST(ConformanceReference, GetRowsAndConcat) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {2, 3});
  Tensor* idx = ctx.new_tensor(DType::i32, {2, 1});
  const auto ab = f32_bytes({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run(ops::get_rows(ctx, a, idx), {{a, ab}, {idx, i32_bytes({2, 0})}}), (std::vector<double>{5, 6, 1, 2}));
  Tensor* b = ctx.new_tensor(DType::f32, {1, 3});
  EXPECT_EQ(run(ops::concat(ctx, a, b, 0), {{a, ab}, {b, f32_bytes({7, 8, 9})}}),
            (std::vector<double>{1, 2, 7, 3, 4, 8, 5, 6, 9}));
}

TEST(ConformanceReference, MulMatIdPicksExperts) {
  Context ctx;
  Tensor* as = ctx.new_tensor(DType::f32, {1, 1, 3});  // experts scale by 10, 20, 30
  Tensor* b = ctx.new_tensor(DType::f32, {1, 1, 2});   // n_b = 1; tokens 1 and 2
  Tensor* ids = ctx.new_tensor(DType::i32, {2, 2});    // token 0: experts 2, 0; token 1: 1, 1
  const auto v = run(ops::mul_mat_id(ctx, as, b, ids),
                     {{as, f32_bytes({10, 20, 30})}, {b, f32_bytes({1, 2})}, {ids, i32_bytes({2, 0, 1, 1})}});
  EXPECT_EQ(v, (std::vector<double>{30, 10, 40, 40}));
}

}  // namespace
}  // namespace weft::conformance
