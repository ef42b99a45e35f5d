// graph_cost: multiply-adds and bytes from shapes, views counted as addressed.
#include <gtest/gtest.h>

#include "weft/core/graph_cost.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

TEST(GraphCost, MatMulCountsEveryMultiplyAdd) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::q8_0, {64, 10});
  Tensor* x = ctx.new_tensor(DType::f32, {64, 3, 2});
  Tensor* y = ops::mul_mat(ctx, w, x);
  const GraphCost c = node_cost(*y);
  EXPECT_EQ(c.multiply_adds, 64u * 10 * 3 * 2);
  // q8_0 rows of 64 are 2 blocks of 34 bytes; x and y are f32.
  EXPECT_EQ(c.bytes, 10u * 68 + 64u * 3 * 2 * 4 + 10u * 3 * 2 * 4);
  Graph g;
  g.expand(y);
  EXPECT_EQ(graph_cost(g).total(), c.total());  // leafs cost nothing
}

// The aliasing trick of issue 9: weight rows that all alias one row through
// nb1 = 0 cost as many multiply-adds as real ones.
TEST(GraphCost, ZeroStrideViewsCostWhatTheyAddress) {
  Context ctx;
  Tensor* row = ctx.new_tensor(DType::f32, {4096});
  const int64_t ne[] = {4096, 1 << 20};
  const size_t nb[] = {4, 0};
  Tensor* w = ops::view(ctx, row, ne, nb, 0);
  Tensor* x = ctx.new_tensor(DType::f32, {4096, 64});
  Graph g;
  g.expand(ops::mul_mat(ctx, w, x));
  const GraphCost c = graph_cost(g);
  EXPECT_EQ(c.multiply_adds, uint64_t{4096} << 26);
  EXPECT_GE(c.bytes, uint64_t{4096} * 4 << 20);  // every aliased row read
}

// Constructors cap each result at 2^52 bytes, but a graph of many such nodes
// (here 300 of 2^56 multiply-adds) sums past 2^64.
TEST(GraphCost, SaturatesInsteadOfWrapping) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {64, 1});
  Tensor* x = ctx.new_tensor(DType::f32, {64});
  const int64_t ne[] = {64, 1 << 25, 1 << 25};
  const size_t nb[] = {4, 0, 0};
  Tensor* b = ops::view(ctx, x, ne, nb, 0);
  Graph g;
  for (int i = 0; i < 300; ++i) g.expand(ops::mul_mat(ctx, a, b));
  EXPECT_EQ(node_cost(*g.nodes().back()).multiply_adds, uint64_t{64} << 50);
  const GraphCost c = graph_cost(g);
  EXPECT_EQ(c.multiply_adds, UINT64_MAX);
  EXPECT_EQ(c.total(), UINT64_MAX);
}

}  // namespace
}  // namespace weft
