// The packed quantized product (backend/cpu/qgemm.h), for the 32-value
// types and the super-block types with groups of 32: panels hold exactly
// the values the dequantizer gives; every level's kernels and the driver
// against a float64 product of the dequantized weights and the q8_0
// activations the engine multiplies (so the integer sums are checked to f32
// accuracy, not to the activations' rounding); the same bytes on 1 and 3
// threads and at both levels; mul_mat through the CPU backend on 1-3
// threads and inside the scratch its family sized.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/qdot.h"
#include "backend/cpu/qgemm.h"
#include "gemm_operands.h"
#include "simd_levels.h"
#include "weft/backend/backend.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/core/ops.h"

namespace weft::cpu {
namespace {

constexpr DType kQgemmTypes[] = {DType::q8_0,   DType::q4_0,  DType::q4_1, DType::q5_0, DType::q5_1,
                                 DType::iq4_nl, DType::mxfp4, DType::q4_K, DType::q5_K, DType::iq4_xs};

using gemm_test::Operands;
using QgemmWeights = gemm_test::Weights;

std::vector<float> qgemm_randoms(size_t n, uint32_t seed) { return gemm_test::randoms(n, seed); }
QgemmWeights qgemm_weights(DType t, int64_t k, int64_t rows, uint32_t seed) {
  return gemm_test::weights(t, k, rows, seed);
}

struct QgemmProblem {
  int64_t m, k, n, step, batches, r;
};
// Row counts around the panel (8), columns around the tile (4), one block
// and several, strided activations, batches broadcast over weight matrices.
// (The super-block types take the problems whose k is a multiple of 256.)
const QgemmProblem kQgemmProblems[] = {
    {1, 32, 1, 1, 1, 1},    {8, 64, 4, 1, 1, 1},   {13, 96, 17, 1, 1, 1},  {37, 288, 21, 3, 1, 1},
    {16, 128, 9, 1, 6, 3},  {70, 320, 33, 1, 1, 1}, {11, 256, 18, 1, 1, 1}, {20, 512, 7, 2, 4, 2},
};

// The float64 product of the dequantized weights and the activations as
// q8_0 quantizes them, and the bound f32 arithmetic may stray from it
// (a few roundings per block, plus one per block of the running sum).
struct QgemmReference {
  std::vector<double> value, bound;
};
QgemmReference qgemm_reference(const QgemmWeights& a, const QgemmProblem& p, const std::vector<float>& b) {
  QgemmReference ref;
  const int64_t nb = p.k / 32;
  std::vector<BlockQ8_0> xq(static_cast<size_t>(nb));
  std::vector<float> row(static_cast<size_t>(p.k));
  for (int64_t bi = 0; bi < p.batches; ++bi)
    for (int64_t j = 0; j < p.n; ++j) {
      for (int64_t i = 0; i < p.k; ++i) row[i] = b[static_cast<size_t>(((bi * p.n + j) * p.k + i) * p.step)];
      quantize_act_row(ActType::q8_0, row.data(), xq.data(), p.k);
      for (int64_t m = 0; m < p.m; ++m) {
        const float* w = a.values.data() + ((bi / p.r) * p.m + m) * p.k;
        double sum = 0.0, mag = 0.0;
        for (int64_t blk = 0; blk < nb; ++blk) {
          double s = 0.0;
          for (int i = 0; i < 32; ++i) s += static_cast<double>(w[blk * 32 + i]) * xq[blk].q[i];
          s *= f16_to_f32(xq[blk].d);
          sum += s;
          mag += std::fabs(s);
        }
        ref.value.push_back(sum);
        ref.bound.push_back(static_cast<double>(nb + 4) * 4.0 * std::ldexp(1.0, -24) * mag + 1e-30);
      }
    }
  return ref;
}

// The product by kernel kern on nth threads (run one after another, each
// with its own scratch of exactly qgemm_scratch_bytes).
std::vector<float> qgemm_run(const QGemmKernel& kern, DType t, const QgemmWeights& a, const QgemmProblem& p,
                             const std::vector<float>& b, int nth) {
  std::vector<float> c(static_cast<size_t>(p.batches * p.n * p.m), std::nanf(""));
  const Operands ops(a, p.m, b.data(), p.k, p.n, p.step, c.data(), p.batches, p.r);
  const GemmShape s{t, p.m, p.k, static_cast<size_t>(p.step) * sizeof(float), p.n};
  Context ctx;
  const Tensor* unused = ctx.new_tensor(DType::f32, {1});
  for (int ith = 0; ith < nth; ++ith) {
    const size_t bytes = qgemm_scratch_bytes(s);
    std::unique_ptr<uint8_t[]> mem(new uint8_t[bytes]);
    const KernelContext kc{ith, nth, mem.get(), bytes};
    AlignedScratch scratch(kc, *unused);
    qgemm_with(kc, kern, s, ops, scratch);
  }
  return c;
}

class QgemmAtLevel : public level_test::LevelTest {
 protected:
  bool needs_vnni() const override { return true; }
};
WEFT_SIMD_LEVELS(QgemmAtLevel);

TEST_P(QgemmAtLevel, EveryTypeMatchesTheFloat64ProductAndEveryThreadCountTheSameBytes) {
  const QGemmKernel* kern = qgemm_kernel_for(level());
  ASSERT_NE(kern, nullptr) << "the level's qgemm kernel is refused on a CPU that has every flag it needs";
  for (DType t : kQgemmTypes) {
    for (const QgemmProblem& p : kQgemmProblems) {
      if (p.k % traits(t).block_size != 0) continue;
      const QgemmWeights a = qgemm_weights(t, p.k, p.m * (p.batches / p.r), 21);
      const std::vector<float> b = qgemm_randoms(static_cast<size_t>(p.batches * p.n * p.k * p.step), 22);
      const QgemmReference ref = qgemm_reference(a, p, b);
      const std::vector<float> one = qgemm_run(*kern, t, a, p, b, 1);
      const std::string what = std::string(kern->name) + " " + std::string(dtype_name(t)) + " m=" +
                               std::to_string(p.m) + " k=" + std::to_string(p.k) + " n=" + std::to_string(p.n) +
                               " step=" + std::to_string(p.step) + " batches=" + std::to_string(p.batches);
      int off = 0;
      for (size_t i = 0; i < ref.value.size(); ++i) {
        if (!(std::fabs(one[i] - ref.value[i]) <= ref.bound[i]) && off++ < 3)
          ADD_FAILURE() << what << ": output " << i << " is " << one[i] << ", float64 " << ref.value[i];
      }
      EXPECT_EQ(off, 0) << what;
      const std::vector<float> three = qgemm_run(*kern, t, a, p, b, 3);
      EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0) << what << " nth=3";
    }
  }
}

TEST(Qgemm, BothLevelsGiveTheSameBytes) {
  const QGemmKernel* vnni = qgemm_kernel_for(Level::avx512);
  if (vnni == nullptr || !level_test::why_not_run(Level::avx512, true).empty())
    GTEST_SKIP() << level_test::why_not_run(Level::avx512, true);
  const QgemmProblem p{37, 512, 21, 1, 1, 1};
  for (DType t : kQgemmTypes) {
    const QgemmWeights a = qgemm_weights(t, p.k, p.m, 23);
    const std::vector<float> b = qgemm_randoms(static_cast<size_t>(p.n * p.k), 24);
    const std::vector<float> x = qgemm_run(avx2_qgemm_kernel(), t, a, p, b, 2);
    const std::vector<float> y = qgemm_run(*vnni, t, a, p, b, 2);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << dtype_name(t);
  }
}

// Every packed value, read back as d * (q - offset) + m, is the value the
// dequantizer gives; rows past the panel's are zero.
TEST(Qgemm, PanelsHoldTheDequantizedValues) {
  constexpr int64_t kK = 512, kRows = 5;
  for (DType t : kQgemmTypes) {
    const QgemmWeights a = qgemm_weights(t, kK, kRows, 25);
    for (bool add_offset : {false, true}) {
      std::vector<QPanelBlock> panel(kK / 32);
      qgemm_pack_panel(t, a.bytes.data(), a.row, kRows, kK / 32, add_offset, panel.data());
      const int offset = add_offset ? qgemm_offset(t) : 0;
      int wrong = 0;
      for (int64_t b = 0; b < kK / 32; ++b)
        for (int r = 0; r < kQPanelRows; ++r)
          for (int n = 0; n < 32; ++n) {
            const auto v = static_cast<int8_t>(panel[b].q[32 * (n / 4) + 4 * r + n % 4]);
            const float got = panel[b].d[r] * static_cast<float>(v - offset) + panel[b].m[r];
            const float want = r < kRows ? a.values[r * kK + b * 32 + n] : 0.0f;
            if (got != want && wrong++ < 3)
              ADD_FAILURE() << dtype_name(t) << " block " << b << " row " << r << " value " << n << ": " << got
                            << " want " << want;
          }
      EXPECT_EQ(wrong, 0) << dtype_name(t) << " add_offset=" << add_offset;
    }
  }
}

TEST(Qgemm, PreferredForTheThirtyTwoValueTypesAndBatchesOnly) {
  EXPECT_TRUE(qgemm_preferred(DType::q8_0, 2048, 2048, 512));
  EXPECT_TRUE(qgemm_preferred(DType::q4_0, 256, 2048, 16));
  EXPECT_FALSE(qgemm_preferred(DType::q4_0, 256, 2048, 1));  // token generation: the matrix-vector path
  EXPECT_TRUE(qgemm_preferred(DType::q4_K, 2048, 2048, 512));
  EXPECT_FALSE(qgemm_preferred(DType::q6_K, 2048, 2048, 512));  // groups of 16: the tiles
  EXPECT_FALSE(qgemm_preferred(DType::q4_K, 2048, 2080, 512));  // not whole super-blocks
  EXPECT_FALSE(qgemm_preferred(DType::f16, 2048, 2048, 512));
}

// mul_mat of [k, m, a2] weights and [k, n, b2] activations (b transposed:
// a view of a packed [n, k, b2]) through the CPU backend's kernel on nth
// threads, each with exactly the scratch its family sized (or none: the
// kernel's own fallback).
struct QgemmMulMat {
  DType t;
  int64_t k, m, n, a2, b2;
  bool transposed_b;
};
std::vector<uint8_t> qgemm_mul_mat(const QgemmMulMat& c, int nth, bool no_scratch) {
  Context ctx;
  Tensor* a = ctx.new_tensor(c.t, {c.k, c.m, c.a2});
  Tensor* leaf = c.transposed_b ? ctx.new_tensor(DType::f32, {c.n, c.k, c.b2}) : ctx.new_tensor(DType::f32, {c.k, c.n, c.b2});
  Tensor* y = ops::mul_mat(ctx, a, c.transposed_b ? ops::transpose(ctx, leaf) : leaf);
  Graph graph;
  graph.expand(y);
  std::vector<Tensor*> all{a, leaf};
  for (Tensor* t : graph.nodes()) all.push_back(t);
  auto device = make_cpu_device(1);
  auto buffer = allocate_tensors(device->default_buffer_type(), all);
  const QgemmWeights w = qgemm_weights(c.t, c.k, c.m * c.a2, 26);
  tensor_set(*a, w.bytes.data(), 0, w.bytes.size());
  const std::vector<float> x = qgemm_randoms(static_cast<size_t>(c.k * c.n * c.b2), 27);
  tensor_set(*leaf, x.data(), 0, x.size() * sizeof(float));
  for (Tensor* node : graph.nodes()) {
    const size_t bytes = scratch_bytes(*node, nth);
    for (int ith = 0; ith < nth; ++ith) {
      std::unique_ptr<uint8_t[]> scratch(no_scratch ? nullptr : new uint8_t[bytes > 0 ? bytes : 1]);
      compute_node(KernelContext{ith, nth, scratch.get(), no_scratch ? 0 : bytes}, *node);
    }
  }
  std::vector<uint8_t> out(y->nbytes());
  tensor_get(*y, out.data(), 0, out.size());
  return out;
}

TEST(Qgemm, MulMatGivesTheSameBytesOnOneTwoAndThreeThreadsInsideItsScratch) {
  const QgemmMulMat cases[] = {
      {DType::q4_0, 256, 37, 40, 1, 1, false},
      {DType::q8_0, 128, 16, 19, 2, 8, false},  // grouped-query attention shape
      {DType::q5_1, 96, 33, 24, 1, 1, true},
  };
  for (const QgemmMulMat& c : cases) {
    ASSERT_TRUE(qgemm_preferred(c.t, c.m, c.k, c.n)) << "the case must take the packed product";
    const std::vector<uint8_t> one = qgemm_mul_mat(c, 1, false);
    for (int nth : {2, 3})
      for (bool no_scratch : {false, true})
        EXPECT_EQ(qgemm_mul_mat(c, nth, no_scratch), one)
            << dtype_name(c.t) << " k=" << c.k << " n=" << c.n << " nth=" << nth << " no_scratch=" << no_scratch;
  }
}

}  // namespace
}  // namespace weft::cpu
