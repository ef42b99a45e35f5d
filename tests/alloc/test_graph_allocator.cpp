// GraphAllocator backs plans with real CPU buffers: reserve once with the
// worst case, then graphs of that shape or smaller never reallocate.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "weft/backend/alloc.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

struct Mlp {
  Context ctx;
  Graph graph;
  Tensor* x = nullptr;
  Tensor* y = nullptr;
};

// y = w2 * silu(w1 * x) for n_tokens columns; the weights live in `weights`.
void build_mlp(Mlp& m, Tensor* w1_src, Tensor* w2_src, int64_t n_tokens) {
  Tensor* w1 = ops::view_2d(m.ctx, w1_src, w1_src->ne[0], w1_src->ne[1], w1_src->nb[1], 0);
  Tensor* w2 = ops::view_2d(m.ctx, w2_src, w2_src->ne[0], w2_src->ne[1], w2_src->nb[1], 0);
  m.x = m.ctx.new_tensor(DType::f32, {w1->ne[0], n_tokens});
  m.x->flags |= kFlagInput;
  m.y = ops::mul_mat(m.ctx, w2, ops::silu(m.ctx, ops::mul_mat(m.ctx, w1, m.x)));
  m.y->flags |= kFlagOutput;
  m.graph.expand(m.y);
}

TEST(GraphAllocator, ReserveOnceThenNeverReallocate) {
  auto cpu = make_cpu_device(2);
  auto backend = cpu->create_backend();
  Context wctx;
  Tensor* w1 = wctx.new_tensor(DType::f32, {32, 64});
  Tensor* w2 = wctx.new_tensor(DType::f32, {64, 16});
  Tensor* both[] = {w1, w2};
  auto weights = allocate_tensors(cpu->default_buffer_type(), both);
  std::vector<float> ones(64 * 32, 1.0f);
  tensor_set(*w1, ones.data(), 0, w1->nbytes());
  tensor_set(*w2, ones.data(), 0, w2->nbytes());

  GraphAllocator galloc({&cpu->default_buffer_type()});
  {
    Mlp worst;
    build_mlp(worst, w1, w2, 8);
    galloc.reserve(worst.graph, {});
  }
  EXPECT_EQ(galloc.reallocations(), 1);
  const size_t reserved = galloc.buffer_size(0);
  EXPECT_GT(reserved, 0u);

  for (int64_t n : {8, 1, 5, 8, 3}) {
    Mlp m;
    build_mlp(m, w1, w2, n);
    galloc.allocate(m.graph, {});
    ASSERT_EQ(m.x->buffer, galloc.buffer(0));
    ASSERT_EQ(m.y->buffer, galloc.buffer(0));
    std::vector<float> x(static_cast<size_t>(32 * n), 0.5f);
    tensor_set(*m.x, x.data(), 0, m.x->nbytes());
    backend->compute(m.graph);
    std::vector<float> y(static_cast<size_t>(16 * n));
    tensor_get(*m.y, y.data(), 0, m.y->nbytes());
    const float hidden = 16.0f / (1.0f + std::exp(-16.0f));  // silu(32 * 0.5)
    for (float v : y) EXPECT_NEAR(v, 64 * hidden, 1e-3f);
  }
  EXPECT_EQ(galloc.reallocations(), 1);
  EXPECT_EQ(galloc.buffer_size(0), reserved);

  // A larger graph grows the buffer once.
  Mlp big;
  build_mlp(big, w1, w2, 64);
  galloc.allocate(big.graph, {});
  EXPECT_EQ(galloc.reallocations(), 2);
  EXPECT_GT(galloc.buffer_size(0), reserved);
}

}  // namespace
}  // namespace weft
