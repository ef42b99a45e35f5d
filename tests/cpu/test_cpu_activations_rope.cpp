// The CPU kernels of gelu_erf, sigmoid, softcap and rope_ext against float64
// formulas written here, element by element: every dtype the constructors
// accept, packed and non-contiguous operands (transposed, permuted, a view
// of some heads), on 1 and 3 threads. rope_ext also: its defaults are rope
// bit for bit, values past n_dims pass unscaled, and frequency factors a
// hostile client may send (zero, negative, NaN, infinite) give what IEEE
// arithmetic gives without crashing (the ASan+UBSan build runs this too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/bind_graph.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

// Element (i0, i1, i2, i3) of a float tensor (f32, f16, bf16) through its strides.
float element(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const uint8_t* p = static_cast<const uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
  float f = 0;
  to_f32(t.type, p, &f, 1);
  return f;
}

// Fills a packed leaf with values from gen, stored in its dtype.
void fill(Tensor& t, const std::function<float()>& gen) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  for (float& x : v) x = gen();
  from_f32(t.type, v.data(), t.data, t.nelements());
}

void fill_i32(Tensor& t, const std::vector<int32_t>& v) {
  ASSERT_EQ(static_cast<size_t>(t.nelements()), v.size());
  std::memcpy(t.data, v.data(), v.size() * sizeof(int32_t));
}

template <class F>
void for_each_index(const Tensor& t, F f) {
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) f(i0, i1, i2, i3);
}

// Runs the graph of out on a fresh CPU backend with nth threads; the caller
// fills the leaves in between (through the returned buffer's memory).
struct CpuRun {
  std::unique_ptr<Device> cpu;
  Graph g;
  std::unique_ptr<Buffer> buffer;
  CpuRun(Tensor* out, int nth) : cpu(make_cpu_device(nth)) {
    g.expand(out);
    buffer = testing::bind_graph(*cpu, g);
  }
  void compute() {
    auto backend = cpu->create_backend();
    backend->compute(g);
    backend->synchronize();
  }
};

// ---------------------------------------------------------------- activations

struct Activation {
  const char* name;
  std::function<Tensor*(Context&, Tensor*)> make;
  std::function<double(double)> ref;
  float range;  // inputs uniform in [-range, range]
};

std::vector<Activation> activations() {
  return {
      {"gelu_erf", [](Context& c, Tensor* a) { return ops::gelu_erf(c, a); },
       [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, 6.0f},
      {"sigmoid", [](Context& c, Tensor* a) { return ops::sigmoid(c, a); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 12.0f},
      {"softcap 2.5", [](Context& c, Tensor* a) { return ops::softcap(c, a, 2.5f); },
       [](double x) { return 2.5 * std::tanh(x / 2.5); }, 6.0f},
      {"softcap 30", [](Context& c, Tensor* a) { return ops::softcap(c, a, 30.0f); },
       [](double x) { return 30.0 * std::tanh(x / 30.0); }, 100.0f},
  };
}

enum class Layout { packed, transposed, permuted, strided };

// An operand of logical shape ne over a fresh leaf (returned in *leaf).
Tensor* laid_out(Context& ctx, DType t, const std::array<int64_t, 4>& ne, Layout l, Tensor** leaf) {
  switch (l) {
    case Layout::packed: return *leaf = ctx.new_tensor(t, {ne[0], ne[1], ne[2], ne[3]});
    case Layout::transposed: *leaf = ctx.new_tensor(t, {ne[1], ne[0], ne[2], ne[3]}); return ops::transpose(ctx, *leaf);
    case Layout::permuted:  // leaf dim i becomes dim axes[i]
      *leaf = ctx.new_tensor(t, {ne[2], ne[0], ne[1], ne[3]});
      return ops::permute(ctx, *leaf, 2, 0, 1, 3);
    case Layout::strided: {  // every other element of rows of a wider leaf, from element 1
      *leaf = ctx.new_tensor(t, {2 * ne[0] + 1, ne[1], ne[2], ne[3]});
      const int64_t vne[] = {ne[0], ne[1], ne[2], ne[3]};
      const size_t vnb[] = {2 * (*leaf)->nb[0], (*leaf)->nb[1], (*leaf)->nb[2], (*leaf)->nb[3]};
      return ops::view(ctx, *leaf, vne, vnb, (*leaf)->nb[0]);
    }
  }
  return nullptr;
}

TEST(CpuActivations, MatchFloat64ForEveryDtypeAndLayout) {
  struct Shape {
    std::array<int64_t, 4> ne;
    Layout layout;
  };
  const Shape shapes[] = {{{1, 1, 1, 1}, Layout::packed},      {{7, 1, 1, 1}, Layout::packed},
                          {{1027, 3, 1, 1}, Layout::packed},   {{67, 5, 3, 2}, Layout::packed},
                          {{9, 13, 2, 1}, Layout::transposed}, {{12, 7, 3, 2}, Layout::permuted},
                          {{20, 6, 2, 1}, Layout::strided}};
  std::mt19937 rng(7);
  for (const Activation& act : activations()) {
    for (DType type : {DType::f32, DType::f16, DType::bf16}) {
      // The kernel computes in f32 and rounds once into the result's dtype.
      const double rel = type == DType::f32 ? 4e-6 : type == DType::f16 ? 1.1e-3 : 8e-3;
      const double abs = type == DType::f16 ? 1e-7 : 1e-30;  // f16 subnormals
      for (const Shape& s : shapes) {
        for (int nth : {1, 3}) {
          Context ctx;
          Tensor* leaf = nullptr;
          Tensor* a = laid_out(ctx, type, s.ne, s.layout, &leaf);
          Tensor* y = act.make(ctx, a);
          ASSERT_EQ(y->type, type);
          CpuRun run(y, nth);
          std::uniform_real_distribution<float> dist(-act.range, act.range);
          fill(*leaf, [&] { return dist(rng); });
          run.compute();
          int bad = 0;
          for_each_index(*y, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            const double x = element(*a, i0, i1, i2, i3);
            const double want = act.ref(x);
            const double got = element(*y, i0, i1, i2, i3);
            if (!(std::abs(got - want) <= rel * std::abs(want) + abs) && bad++ < 3) {
              ADD_FAILURE() << act.name << " " << dtype_name(type) << " " << shape_string(*y) << " layout "
                            << static_cast<int>(s.layout) << " nth " << nth << ": f(" << x << ") = " << got << ", want "
                            << want;
            }
          });
        }
      }
    }
  }
}

TEST(CpuActivations, LimitsAndSpecialValues) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {8});
  Tensor* sig = ops::sigmoid(ctx, x);
  Tensor* cap = ops::softcap(ctx, x, 30.0f);
  Tensor* ge = ops::gelu_erf(ctx, x);
  Graph g;
  for (Tensor* t : {sig, cap, ge}) g.expand(t);
  auto cpu = make_cpu_device(2);
  auto buffer = testing::bind_graph(*cpu, g);
  const float inf = std::numeric_limits<float>::infinity();
  const float in[8] = {-inf, inf, -200.0f, 200.0f, 0.0f, -30.0f, 1e-30f, std::nanf("")};
  std::memcpy(x->data, in, sizeof in);
  cpu->create_backend()->compute(g);
  auto at = [](const Tensor* t, int i) { return static_cast<const float*>(t->data)[i]; };
  EXPECT_EQ(at(sig, 0), 0.0f);
  EXPECT_EQ(at(sig, 1), 1.0f);
  EXPECT_EQ(at(sig, 2), 0.0f);
  EXPECT_EQ(at(sig, 3), 1.0f);
  EXPECT_EQ(at(sig, 4), 0.5f);
  EXPECT_TRUE(std::isnan(at(sig, 7)));
  EXPECT_EQ(at(cap, 0), -30.0f);
  EXPECT_EQ(at(cap, 1), 30.0f);
  EXPECT_NEAR(at(cap, 3), 30.0f * std::tanh(200.0 / 30.0), 1e-4);
  EXPECT_EQ(at(cap, 4), 0.0f);
  EXPECT_NEAR(at(cap, 6), 1e-30f, 1e-36f);
  EXPECT_TRUE(std::isnan(at(cap, 7)));
  EXPECT_EQ(at(ge, 2), 0.0f);  // -200 Phi(-200): underflows to (-)0
  EXPECT_EQ(at(ge, 3), 200.0f);
  EXPECT_EQ(at(ge, 4), 0.0f);
  EXPECT_NEAR(at(ge, 5), 0.0, 1e-30);
  EXPECT_TRUE(std::isnan(at(ge, 7)));
}

// ---------------------------------------------------------------- rope_ext

enum class Src { packed, heads_view, permuted };

struct RopeCase {
  std::array<int64_t, 3> a;  // head_dim, n_head, n_tokens
  int n_dims;
  RopeMode mode;
  float base;
  Src src;
  int factors;  // 0 none, 1 a leaf, 2 a contiguous view inside a bigger leaf
  ops::RopeScaling scaling;
};

struct RopeGraph {
  Context ctx;
  Tensor* leaf = nullptr;  // a's root
  Tensor* a = nullptr;
  Tensor* pos = nullptr;
  Tensor* ff_leaf = nullptr;
  Tensor* ff = nullptr;
  Tensor* y = nullptr;
};

void build_rope(RopeGraph& r, const RopeCase& c, bool ext = true) {
  Context& ctx = r.ctx;
  const int64_t hd = c.a[0], nh = c.a[1], nt = c.a[2];
  if (c.src == Src::packed) {
    r.a = r.leaf = ctx.new_tensor(DType::f32, {hd, nh, nt});
  } else if (c.src == Src::heads_view) {
    r.leaf = ctx.new_tensor(DType::f32, {hd, nh + 3, nt});
    r.a = ops::view_3d(ctx, r.leaf, hd, nh, nt, r.leaf->nb[1], r.leaf->nb[2], 2 * r.leaf->nb[1]);
  } else {
    r.leaf = ctx.new_tensor(DType::f32, {hd, nt, nh});
    r.a = ops::permute(ctx, r.leaf, 0, 2, 1, 3);
  }
  r.pos = ctx.new_tensor(DType::i32, {nt});
  const int64_t half = c.n_dims / 2;
  if (c.factors == 1) {
    r.ff = r.ff_leaf = ctx.new_tensor(DType::f32, {half});
  } else if (c.factors == 2) {
    r.ff_leaf = ctx.new_tensor(DType::f32, {half + 4});
    r.ff = ops::view_1d(ctx, r.ff_leaf, half, 3 * sizeof(float));
  }
  r.y = ext ? ops::rope_ext(ctx, r.a, r.pos, r.ff, c.n_dims, c.mode, c.base, c.scaling)
            : ops::rope(ctx, r.a, r.pos, c.n_dims, c.mode, c.base);
}

// rope_ext of row (i1, i2) in float64, straight from ops.h.
std::vector<double> rope_row(const RopeGraph& r, const RopeCase& c, int64_t i1, int64_t i2) {
  const int64_t hd = c.a[0], half = c.n_dims / 2;
  int32_t p = 0;
  std::memcpy(&p, static_cast<const uint8_t*>(r.pos->data) + i2 * r.pos->nb[0], sizeof p);
  std::vector<double> out(static_cast<size_t>(hd));
  for (int64_t i = 0; i < hd; ++i) out[i] = element(*r.a, i, i1, i2, 0);
  for (int64_t i = 0; i < half; ++i) {
    const double ff = r.ff ? element(*r.ff, i, 0, 0, 0) : 1.0;
    const double theta =
        p * static_cast<double>(c.scaling.freq_scale) * std::pow(static_cast<double>(c.base), -2.0 * i / c.n_dims) / ff;
    const int64_t j0 = c.mode == RopeMode::neox ? i : 2 * i, j1 = c.mode == RopeMode::neox ? i + half : 2 * i + 1;
    const double x0 = element(*r.a, j0, i1, i2, 0), x1 = element(*r.a, j1, i1, i2, 0);
    out[j0] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * c.scaling.attn_factor;
    out[j1] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * c.scaling.attn_factor;
  }
  return out;
}

TEST(CpuRopeExt, MatchesFloat64AtEveryLayout) {
  const RopeCase cases[] = {
      {{64, 4, 5}, 64, RopeMode::normal, 500000.0f, Src::packed, 1, {}},
      {{64, 4, 5}, 64, RopeMode::neox, 500000.0f, Src::packed, 1, {}},
      {{96, 2, 4}, 64, RopeMode::neox, 10000.0f, Src::packed, 1, {1.0f, 1.19f}},
      {{48, 3, 5}, 32, RopeMode::normal, 10000.0f, Src::permuted, 2, {1.0f, 0.8f}},
      {{48, 3, 5}, 32, RopeMode::neox, 10000.0f, Src::heads_view, 2, {0.25f, 1.5f}},
      {{32, 3, 4}, 16, RopeMode::normal, 1e6f, Src::heads_view, 0, {0.125f, 1.5f}},
      {{8, 2, 7}, 6, RopeMode::neox, 10000.0f, Src::permuted, 0, {0.5f, 2.0f}},
      {{2, 1, 1}, 2, RopeMode::normal, 10000.0f, Src::packed, 1, {2.0f, 1.0f}},
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), fac(0.5f, 40.0f);
  for (const RopeCase& c : cases) {
    for (int nth : {1, 3}) {
      RopeGraph r;
      build_rope(r, c);
      CpuRun run(r.y, nth);
      fill(*r.leaf, [&] { return val(rng); });
      if (r.ff_leaf) fill(*r.ff_leaf, [&] { return fac(rng); });
      std::vector<int32_t> pos(static_cast<size_t>(c.a[2]));
      for (size_t i = 0; i < pos.size(); ++i) pos[i] = i == 0 ? 0 : static_cast<int32_t>(rng() % 70000);
      fill_i32(*r.pos, pos);
      run.compute();
      const std::string what = shape_string(*r.y) + " n_dims " + std::to_string(c.n_dims) + " mode " +
                               std::to_string(static_cast<int>(c.mode)) + " src " +
                               std::to_string(static_cast<int>(c.src)) + " factors " + std::to_string(c.factors) +
                               " nth " + std::to_string(nth);
      for (int64_t i2 = 0; i2 < c.a[2]; ++i2) {
        for (int64_t i1 = 0; i1 < c.a[1]; ++i1) {
          const std::vector<double> want = rope_row(r, c, i1, i2);
          for (int64_t i0 = 0; i0 < c.a[0]; ++i0) {
            const float got = element(*r.y, i0, i1, i2, 0);
            if (i0 >= c.n_dims) {  // the tail: copied, not scaled
              ASSERT_EQ(got, element(*r.a, i0, i1, i2, 0)) << what << " tail " << i0;
            } else {
              ASSERT_NEAR(got, want[static_cast<size_t>(i0)], 1e-6 * (1 + std::abs(want[static_cast<size_t>(i0)])))
                  << what << " at " << i0 << "," << i1 << "," << i2;
            }
          }
        }
      }
    }
  }
}

// Runs c as rope_ext (or rope) on given data and returns y's bytes.
std::vector<float> rope_output(const RopeCase& c, bool ext, const std::vector<int32_t>& pos,
                               const std::vector<float>& factors, int nth) {
  RopeGraph r;
  build_rope(r, c, ext);
  CpuRun run(r.y, nth);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> val(-2.0f, 2.0f);
  fill(*r.leaf, [&] { return val(rng); });
  if (r.ff_leaf) {
    size_t k = 0;
    fill(*r.ff_leaf, [&] { return factors[k++ % factors.size()]; });
  }
  fill_i32(*r.pos, pos);
  run.compute();
  std::vector<float> out(static_cast<size_t>(r.y->nelements()));
  std::memcpy(out.data(), r.y->data, out.size() * sizeof(float));
  return out;
}

TEST(CpuRopeExt, DefaultsAndUnitFactorsAreRopeBitForBit) {
  const std::vector<int32_t> pos = {0, 5, 4095, 123456, -3};
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    for (Src src : {Src::packed, Src::heads_view, Src::permuted}) {
      RopeCase c{{32, 3, 5}, 24, mode, 10000.0f, src, 0, {}};
      const std::vector<float> rope = rope_output(c, false, pos, {}, 2);
      EXPECT_EQ(rope_output(c, true, pos, {}, 2), rope);
      c.factors = 1;
      EXPECT_EQ(rope_output(c, true, pos, {1.0f}, 3), rope);  // dividing by 1 is exact
      c.factors = 2;
      EXPECT_EQ(rope_output(c, true, pos, {1.0f}, 1), rope);
    }
  }
}

TEST(CpuRopeExt, SplitAcrossThreadsGivesTheSameBytes) {
  const RopeCase c{{40, 5, 7}, 30, RopeMode::neox, 500000.0f, Src::heads_view, 1, {0.5f, 1.25f}};
  const std::vector<int32_t> pos = {0, 1, 2, 3, 100, 100, 9000};
  const std::vector<float> ff = {1.0f, 2.5f, 8.0f};
  const std::vector<float> one = rope_output(c, true, pos, ff, 1);
  for (int nth : {2, 3, 7, 64}) EXPECT_EQ(rope_output(c, true, pos, ff, nth), one) << nth;
}

// Factors are data a hostile client chooses: any float must compute to what
// IEEE arithmetic gives (NaN or infinite angles give NaN), never crash or
// touch the tail. Positions at the ends of int32 too.
TEST(CpuRopeExt, HostileFactorsAndPositionsComputeWithoutCrashing) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> hostile = {
      0.0f, -0.0f, -1.0f, std::nanf(""), inf, -inf, 1e-45f, std::numeric_limits<float>::max(), 1e-30f, 3.0f};
  const std::vector<int32_t> pos = {0, INT32_MAX, INT32_MIN, -7, 1};
  for (RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    for (ops::RopeScaling s : {ops::RopeScaling{}, ops::RopeScaling{1e-30f, 3e38f}, ops::RopeScaling{3e38f, 1e-30f}}) {
      const RopeCase c{{24, 2, 5}, 20, mode, 10000.0f, Src::packed, 1, s};
      std::vector<float> got;
      ASSERT_NO_THROW(got = rope_output(c, true, pos, hostile, 3));
      // The tail (dims 20..23) is the input, whatever the factors did.
      RopeGraph r;
      build_rope(r, c);
      CpuRun run(r.y, 1);
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> val(-2.0f, 2.0f);
      fill(*r.leaf, [&] { return val(rng); });
      for (int64_t row = 0; row < 2 * 5; ++row) {
        for (int64_t i0 = 20; i0 < 24; ++i0) {
          EXPECT_EQ(got[static_cast<size_t>(row * 24 + i0)], static_cast<const float*>(r.leaf->data)[row * 24 + i0]);
        }
      }
      // At position 1 (token 4; row 8 is its head 0): a NaN factor makes its
      // pair NaN; an infinite one a zero angle, so with the default scaling
      // the pair is unchanged.
      const size_t row = 8 * 24;
      const int64_t pair_nan = 3, pair_inf = 4;
      const int64_t j_nan = mode == RopeMode::neox ? pair_nan : 2 * pair_nan;
      EXPECT_TRUE(std::isnan(got[row + j_nan]));
      if (s.freq_scale == 1.0f && s.attn_factor == 1.0f) {
        const int64_t j_inf = mode == RopeMode::neox ? pair_inf : 2 * pair_inf;
        EXPECT_EQ(got[row + j_inf], static_cast<const float*>(r.leaf->data)[row + j_inf]);
        // A finite factor rotates: pair 9 (factor 3) moved.
        const int64_t j9 = mode == RopeMode::neox ? 9 : 18;
        EXPECT_NE(got[row + j9], static_cast<const float*>(r.leaf->data)[row + j9]);
      }
    }
  }
}

}  // namespace
}  // namespace weft
