// The packed matrix product (backend/cpu/gemm.h): every level's register
// tile and the blocked driver against a scalar chain of fused multiply-adds,
// bit for bit (gemm.h defines each output as that chain, whatever the
// blocking, tile edges, thread count or level); mul_mat through the CPU
// backend giving the same bytes on 1, 2 and 3 threads; the kernel inside
// exactly the scratch its family sized.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "gemm_operands.h"
#include "simd_levels.h"
#include "weft/backend/backend.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/core/ops.h"

namespace weft::cpu {
namespace {

using gemm_test::Operands;
using gemm_test::randoms;
using gemm_test::Weights;
using gemm_test::weights;

// The definition: c = fma(a_k, b_k, c) in k order from 0.
std::vector<float> fma_chains(const Weights& a, int64_t m, const float* b, int64_t k, int64_t n, int64_t step,
                              int64_t batches, int64_t r) {
  std::vector<float> c(static_cast<size_t>(batches * n * m));
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const float* w = a.values.data() + ((bi / r) * m + i) * k;
        const float* x = b + (bi * n + j) * k * step;
        float s = 0.0f;
        for (int64_t q = 0; q < k; ++q) s = std::fma(w[q], x[q * step], s);
        c[static_cast<size_t>((bi * n + j) * m + i)] = s;
      }
  return c;
}

// One level per test instance (simd_levels.h): the level's kernels, which a
// CPU with every flag the level needs must be given.
class GemmKernelLevelTest : public level_test::LevelTest {
 protected:
  std::vector<const GemmKernel*> levels() const {
    const GemmKernel* k = gemm_kernel_for(level());
    EXPECT_NE(k, nullptr) << "the " << level_test::level_name(level())
                          << " gemm kernels are refused on a CPU that has every flag they need";
    if (k == nullptr) return {};
    return {k};
  }
};

class GemmAtLevel : public GemmKernelLevelTest {};
WEFT_SIMD_LEVELS(GemmAtLevel);

struct Aligned {
  explicit Aligned(int64_t n)
      : p(static_cast<float*>(std::aligned_alloc(64, (static_cast<size_t>(n) * 4 + 63) / 64 * 64))) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  float* p;
};

struct Problem {
  int64_t m, k, n, step, batches, r;
};

TEST_P(GemmAtLevel, EveryLevelAndBlockingIsTheFmaChainBitForBit) {
  // Tails of every loop: M around mr (16, 32) and mc (256), N around nr
  // (6, 12), K not a multiple of 8 and past kc (256); strided activations;
  // batches broadcast over weight matrices.
  const Problem problems[] = {
      {1, 1, 1, 1, 1, 1},    {5, 7, 3, 1, 1, 1},    {33, 9, 13, 1, 1, 1},  {17, 300, 25, 1, 1, 1},
      {70, 37, 29, 3, 1, 1}, {300, 20, 7, 1, 1, 1}, {40, 64, 14, 1, 6, 3}, {16, 257, 12, 2, 2, 1},
  };
  for (const GemmKernel* kern : levels()) {
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      for (const Problem& p : problems) {
        const Weights a = weights(t, p.k, p.m * (p.batches / p.r), 11);
        const std::vector<float> b = randoms(static_cast<size_t>(p.batches * p.n * p.k * p.step), 12);
        const std::vector<float> want = fma_chains(a, p.m, b.data(), p.k, p.n, p.step, p.batches, p.r);
        const GemmShape s{t, p.m, p.k, static_cast<size_t>(p.step) * sizeof(float), p.n};
        const GemmBlocking tiny{kern->mr, 5, kern->nr};  // every loop runs many times
        for (const GemmBlocking& blk : {gemm_blocking(*kern, s), tiny}) {
          for (int nth : {1, 3}) {
            std::vector<float> got(want.size(), std::nanf(""));
            const Operands ops(a, p.m, b.data(), p.k, p.n, p.step, got.data(), p.batches, p.r);
            Aligned a_buf(blk.mc * blk.kc), b_buf(blk.kc * blk.nc);
            for (int ith = 0; ith < nth; ++ith)
              gemm_with(KernelContext{ith, nth, nullptr, 0}, *kern, blk, s, ops, a_buf.p, b_buf.p);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << kern->name << " " << dtype_name(t) << " m=" << p.m << " k=" << p.k << " n=" << p.n
                << " step=" << p.step << " batches=" << p.batches << " mc=" << blk.mc << " kc=" << blk.kc
                << " nth=" << nth;
          }
        }
      }
    }
  }
}

TEST(Gemm, PreferredForFloatWeightsAndBatchesOnly) {
  EXPECT_TRUE(gemm_preferred(DType::f16, 2048, 2048, 512));
  EXPECT_TRUE(gemm_preferred(DType::f32, 2048, 2048, 512));
  EXPECT_TRUE(gemm_preferred(DType::bf16, 512, 128, 8));
  EXPECT_FALSE(gemm_preferred(DType::f16, 2048, 2048, 1));  // token generation: the matrix-vector path
  EXPECT_FALSE(gemm_preferred(DType::q8_0, 2048, 2048, 512));
  EXPECT_FALSE(gemm_preferred(DType::f32, 2048, 0, 512));
}

// A mul_mat of weights [k, m, a2] (type t) and activations [k, n, b2]; b
// transposed when asked (a view of a packed [n, k, b2]).
struct MulMat {
  DType t;
  int64_t k, m, n, a2, b2;
  bool transposed_b = false;
};
const MulMat kMulMats[] = {
    {DType::f32, 300, 70, 80, 1, 1},
    {DType::f16, 128, 40, 19, 2, 8},  // grouped-query attention: 8 query heads over 2 kv heads
    {DType::bf16, 96, 33, 50, 1, 1, true},
    {DType::f16, 2100, 37, 45, 1, 1},
};

struct Built {
  Context ctx;
  Tensor* a = nullptr;
  Tensor* b_leaf = nullptr;
  Tensor* y = nullptr;
  Graph graph;
};
std::unique_ptr<Built> build(const MulMat& c) {
  auto g = std::make_unique<Built>();
  g->a = g->ctx.new_tensor(c.t, {c.k, c.m, c.a2});
  Tensor* b = nullptr;
  if (c.transposed_b) {
    g->b_leaf = g->ctx.new_tensor(DType::f32, {c.n, c.k, c.b2});
    b = ops::transpose(g->ctx, g->b_leaf);
  } else {
    g->b_leaf = b = g->ctx.new_tensor(DType::f32, {c.k, c.n, c.b2});
  }
  g->y = ops::mul_mat(g->ctx, g->a, b);
  g->graph.expand(g->y);
  return g;
}

std::vector<uint8_t> run_on_threads(const MulMat& c, int nth) {
  auto device = make_cpu_device(nth);
  auto backend = device->create_backend();
  auto g = build(c);
  std::vector<Tensor*> all{g->a, g->b_leaf};
  for (Tensor* t : g->graph.nodes()) all.push_back(t);
  auto buffer = allocate_tensors(device->default_buffer_type(), all);
  const Weights w = weights(c.t, c.k, c.m * c.a2, 31);
  tensor_set(*g->a, w.bytes.data(), 0, w.bytes.size());
  const std::vector<float> x = randoms(static_cast<size_t>(c.k * c.n * c.b2), 32);
  tensor_set(*g->b_leaf, x.data(), 0, x.size() * sizeof(float));
  backend->compute(g->graph);
  backend->synchronize();
  std::vector<uint8_t> out(g->y->nbytes());
  tensor_get(*g->y, out.data(), 0, out.size());
  return out;
}

TEST(Gemm, MulMatGivesTheSameBytesOnOneTwoAndThreeThreads) {
  for (const MulMat& c : kMulMats) {
    ASSERT_TRUE(gemm_preferred(c.t, c.m, c.k, c.n)) << "the case must take the packed product";
    const std::vector<uint8_t> one = run_on_threads(c, 1);
    for (int nth : {2, 3}) {
      EXPECT_EQ(run_on_threads(c, nth), one) << dtype_name(c.t) << " k=" << c.k << " n=" << c.n << " nth=" << nth;
    }
  }
}

// The family's kernel with exactly scratch_bytes(node, nth) bytes per thread
// (a heap block of that size, so a sanitizer sees a write past it), or with
// none (the kernel's own fallback): the same bytes as the backend.
TEST(Gemm, RunsInsideTheScratchItsFamilySized) {
  for (const MulMat& c : kMulMats) {
    const std::vector<uint8_t> want = run_on_threads(c, 1);
    for (bool no_scratch : {false, true}) {
      for (int nth : {1, 2, 3}) {
        auto g = build(c);
        std::vector<Tensor*> all{g->a, g->b_leaf};
        for (Tensor* t : g->graph.nodes()) all.push_back(t);
        auto device = make_cpu_device(1);
        auto buffer = allocate_tensors(device->default_buffer_type(), all);
        const Weights w = weights(c.t, c.k, c.m * c.a2, 31);
        tensor_set(*g->a, w.bytes.data(), 0, w.bytes.size());
        const std::vector<float> x = randoms(static_cast<size_t>(c.k * c.n * c.b2), 32);
        tensor_set(*g->b_leaf, x.data(), 0, x.size() * sizeof(float));
        for (Tensor* node : g->graph.nodes()) {
          const size_t bytes = scratch_bytes(*node, nth);
          for (int ith = 0; ith < nth; ++ith) {
            std::unique_ptr<uint8_t[]> scratch(no_scratch ? nullptr : new uint8_t[bytes > 0 ? bytes : 1]);
            compute_node(KernelContext{ith, nth, scratch.get(), no_scratch ? 0 : bytes}, *node);
          }
        }
        std::vector<uint8_t> got(g->y->nbytes());
        tensor_get(*g->y, got.data(), 0, got.size());
        EXPECT_EQ(got, want) << dtype_name(c.t) << " k=" << c.k << " nth=" << nth << " no_scratch=" << no_scratch;
      }
    }
  }
}

}  // namespace
}  // namespace weft::cpu
