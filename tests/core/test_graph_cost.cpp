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


// Each cost rule of the op registry, against counts worked out by hand from
// the rule's definition (graph_cost.h): bytes are every operand's and the
// result's addressed bytes, multiply-adds the rule's.
TEST(GraphCost, EachCostRuleCountsItsWork) {
  Context ctx;
  // per element: the larger of what is written and what src[0] holds.
  Tensor* a = ctx.new_tensor(DType::f32, {7, 3});
  EXPECT_EQ(node_cost(*ops::sum_rows(ctx, a)).multiply_adds, 21u);
  EXPECT_EQ(node_cost(*ops::add(ctx, a, ctx.new_tensor(DType::f32, {7, 1}))).multiply_adds, 21u);
  // sort: every element of a row of 10 takes ceil(log2 10) = 4 comparisons.
  Tensor* s = ctx.new_tensor(DType::f32, {10, 3});
  const GraphCost sorted = node_cost(*ops::argsort(ctx, s, SortOrder::ascending));
  EXPECT_EQ(sorted.multiply_adds, 30u * 4);
  EXPECT_EQ(sorted.bytes, 30u * 4 + 30u * 4);  // i32 result, f32 source
  EXPECT_EQ(node_cost(*ops::top_k(ctx, s, 2)).multiply_adds, 30u * 4);
  // set_rows: one per element of the rows written.
  Tensor* dst = ctx.new_tensor(DType::f32, {8, 6});
  Tensor* rows = ctx.new_tensor(DType::f32, {8, 2});
  Tensor* idx = ctx.new_tensor(DType::i32, {2});
  EXPECT_EQ(node_cost(*ops::set_rows(ctx, dst, rows, idx)).multiply_adds, 16u);
  // product by experts: K = 8 per element of [4, 2, 5].
  Tensor* as = ctx.new_tensor(DType::f32, {8, 4, 3});
  Tensor* b = ctx.new_tensor(DType::f32, {8, 2, 5});
  Tensor* ids = ctx.new_tensor(DType::i32, {2, 5});
  EXPECT_EQ(node_cost(*ops::mul_mat_id(ctx, as, b, ids)).multiply_adds, 8u * 40);
  // attention: 12 (query row, head) pairs, each over 10 keys of 64 + 64 + 1
  // operations, and each reading its kv head's K and V rows again.
  Tensor* q = ctx.new_tensor(DType::f32, {64, 3, 4});
  Tensor* k = ctx.new_tensor(DType::f16, {64, 10, 2});
  Tensor* v = ctx.new_tensor(DType::f16, {64, 10, 2});
  const GraphCost attn = node_cost(*ops::flash_attn(ctx, q, k, v, nullptr, 0.125f));
  EXPECT_EQ(attn.multiply_adds, 12u * 10 * 129);
  const uint64_t operands = 64u * 4 * 3 * 4 + 64u * 3 * 4 * 4 + 2 * (64u * 10 * 2 * 2);
  EXPECT_EQ(attn.bytes, operands + 12u * (64 * 10 * 2 * 2));
  // views and leafs compute nothing.
  EXPECT_EQ(node_cost(*ops::transpose(ctx, a)).total(), 0u);
  EXPECT_EQ(node_cost(*a).total(), 0u);
}

}  // namespace
}  // namespace weft
