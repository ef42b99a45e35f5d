#include <gtest/gtest.h>

#include <algorithm>

#include "weft/core/graph.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

size_t position(std::span<Tensor* const> list, const Tensor* t) {
  return static_cast<size_t>(std::find(list.begin(), list.end(), t) - list.begin());
}

TEST(Graph, TopologicalOrderWithSharedSubexpressions) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {8, 2});
  Tensor* w = ctx.new_tensor(DType::f32, {8, 8});
  Tensor* n = ops::rms_norm(ctx, x, 1e-5f);
  Tensor* a = ops::mul_mat(ctx, w, n);
  Tensor* b = ops::silu(ctx, n);
  Tensor* y = ops::add(ctx, a, b);
  Graph g;
  g.expand(y);
  g.expand(y);  // idempotent
  ASSERT_EQ(g.nodes().size(), 4u);
  ASSERT_EQ(g.leafs().size(), 2u);
  for (Tensor* node : g.nodes()) {
    for (Tensor* s : node->src) {
      if (s && s->op != Op::none) {
        EXPECT_LT(position(g.nodes(), s), position(g.nodes(), node));
      }
    }
  }
  EXPECT_EQ(g.nodes().back(), y);
}

TEST(Graph, ViewsFollowTheirSourcesAndDeepChainsDoNotRecurse) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {4, 4});
  Tensor* t = ops::transpose(ctx, x);
  Tensor* y = ops::cont(ctx, t);
  for (int i = 0; i < 100000; ++i) y = ops::scale(ctx, y, 1.0f);
  Graph g;
  g.expand(y);
  EXPECT_EQ(g.nodes().size(), 100002u);
  EXPECT_EQ(g.nodes()[0], t);
  EXPECT_TRUE(g.contains(x));
}

}  // namespace
}  // namespace weft
