// Op constructors: result shapes, and errors that name the op and shapes.
#include <gtest/gtest.h>

#include <string>

#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

// Expects fn to throw invalid_input with a message starting "[op]".
template <typename Fn>
void expect_op_error(const std::string& op, Fn fn) {
  try {
    fn();
    ADD_FAILURE() << "no error from " << op;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
    EXPECT_EQ(std::string(e.what()).rfind("[" + op + "]", 0), 0u) << e.what();
  }
}

TEST(OpShapes, MulMatResultAndBroadcast) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::q4_0, {64, 10, 2});
  Tensor* x = ctx.new_tensor(DType::f32, {64, 3, 4, 5});
  Tensor* y = ops::mul_mat(ctx, w, x);
  EXPECT_EQ(shape_string(*y), "f32[10,3,4,5]");
  expect_op_error("mul_mat", [&] { ops::mul_mat(ctx, w, ctx.new_tensor(DType::f32, {32, 3})); });
  expect_op_error("mul_mat", [&] { ops::mul_mat(ctx, w, ctx.new_tensor(DType::f32, {64, 3, 3})); });
  expect_op_error("mul_mat", [&] { ops::mul_mat(ctx, w, ctx.new_tensor(DType::f16, {64, 3})); });
}

// The remote heap overflow of issue 9: 0 % N == 0 let add accept an empty
// row of a against N elements of b, and the kernel sized its row scratch
// from a. Broadcasting now needs each dim of a to be a positive multiple of
// b's; the only zero case is a dim empty in both.
TEST(OpShapes, BroadcastNeedsAPositiveMultiple) {
  Context ctx;
  Tensor* empty_rows = ctx.new_tensor(DType::f32, {0, 4});
  for (auto op : {ops::add, ops::sub, ops::mul, ops::div}) {
    expect_op_error(op == ops::add ? "add" : op == ops::sub ? "sub" : op == ops::mul ? "mul" : "div", [&] {
      op(ctx, empty_rows, ctx.new_tensor(DType::f32, {64}));
    });
  }
  expect_op_error("add", [&] { ops::add(ctx, empty_rows, ctx.new_tensor(DType::f16, {1})); });
  expect_op_error("add", [&] { ops::add(ctx, ctx.new_tensor(DType::f32, {8, 0}), ctx.new_tensor(DType::f32, {8, 3})); });
  expect_op_error("add", [&] { ops::add(ctx, ctx.new_tensor(DType::f32, {8, 2}), ctx.new_tensor(DType::f32, {8, 4})); });
  expect_op_error("add", [&] { ops::add(ctx, ctx.new_tensor(DType::f32, {8}), ctx.new_tensor(DType::f32, {0})); });
  // Allowed: equal shapes (empty ones included) and positive multiples.
  EXPECT_EQ(shape_string(*ops::add(ctx, empty_rows, ctx.new_tensor(DType::f32, {0, 4}))), "f32[0,4,1,1]");
  EXPECT_EQ(shape_string(*ops::add(ctx, empty_rows, ctx.new_tensor(DType::f32, {0, 1}))), "f32[0,4,1,1]");
  EXPECT_EQ(shape_string(*ops::mul(ctx, ctx.new_tensor(DType::f32, {8, 6}), ctx.new_tensor(DType::f32, {4, 3}))),
            "f32[8,6,1,1]");
}

TEST(OpShapes, SortRowsFitInt32Indices) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {16});
  const int64_t ne[] = {int64_t{1} << 32};
  const size_t nb[] = {0};
  Tensor* wide = ops::view(ctx, a, ne, nb, 0);  // one element seen 2^32 times
  expect_op_error("top_k", [&] { ops::top_k(ctx, wide, 1); });
  expect_op_error("argsort", [&] { ops::argsort(ctx, wide, SortOrder::ascending); });
}

TEST(OpShapes, ErrorsNameTheShapes) {
  Context ctx;
  try {
    ops::add(ctx, ctx.new_tensor(DType::f32, {4, 3}), ctx.new_tensor(DType::f32, {3}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[3,1,1,1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[4,3,1,1]"), std::string::npos) << e.what();
  }
}

TEST(OpShapes, EveryConstructorChecksItsOperands) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4, 2});
  Tensor* i = ctx.new_tensor(DType::i32, {3});
  expect_op_error("swiglu", [&] { ops::swiglu(ctx, a, ctx.new_tensor(DType::f32, {8, 4})); });
  expect_op_error("rms_norm", [&] { ops::rms_norm(ctx, ctx.new_tensor(DType::f16, {8}), 1e-5f); });
  expect_op_error("soft_max", [&] { ops::soft_max(ctx, a, ctx.new_tensor(DType::f32, {8, 3}), 1.0f); });
  expect_op_error("rope", [&] { ops::rope(ctx, a, i, 8, RopeMode::normal, 1e4f); });  // 2 tokens, 3 positions
  expect_op_error("rope", [&] { ops::rope(ctx, a, ctx.new_tensor(DType::i32, {2}), 7, RopeMode::neox, 1e4f); });
  expect_op_error("top_k", [&] { ops::top_k(ctx, a, 9); });
  expect_op_error("get_rows", [&] { ops::get_rows(ctx, a, ctx.new_tensor(DType::f32, {3})); });
  expect_op_error("set_rows", [&] { ops::set_rows(ctx, a, ctx.new_tensor(DType::f32, {8, 3, 2}), i); });
  expect_op_error("cpy", [&] { ops::cpy(ctx, a, ctx.new_tensor(DType::f16, {8, 4})); });
  expect_op_error("concat", [&] { ops::concat(ctx, a, ctx.new_tensor(DType::f32, {8, 5, 2}), 0); });
  expect_op_error("concat", [&] { ops::concat(ctx, a, a, 4); });
  expect_op_error("mul_mat_id", [&] {
    ops::mul_mat_id(ctx, ctx.new_tensor(DType::f32, {8, 6, 4}), ctx.new_tensor(DType::f32, {8, 3, 5}),
                    ctx.new_tensor(DType::i32, {2, 5}));
  });
  expect_op_error("permute", [&] { ops::permute(ctx, a, 0, 0, 1, 2); });
  expect_op_error("transpose", [&] { ops::transpose(ctx, ctx.new_tensor(DType::q8_0, {32, 2})); });
  expect_op_error("reshape", [&] { ops::reshape(ctx, a, {8, 4}); });
  expect_op_error("reshape", [&] { ops::reshape(ctx, ops::transpose(ctx, a), {64}); });
}

TEST(OpShapes, NewTensorRejectsImpossibleShapes) {
  Context ctx;
  EXPECT_THROW(ctx.new_tensor(DType::q8_0, {31}), Error);
  EXPECT_THROW(ctx.new_tensor(DType::f32, {-1}), Error);
  EXPECT_THROW(ctx.new_tensor(DType::f32, {1, 2, 3, 4, 5}), Error);
  EXPECT_THROW(ctx.new_tensor(DType::f32, {int64_t{1} << 40, int64_t{1} << 40}), Error);
}

TEST(Views, StayInsideTheirSource) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {10, 6});  // 240 bytes
  Tensor* v = ops::view_2d(ctx, a, 4, 3, a->nb[1], 2 * a->nb[1] + 8);
  EXPECT_EQ(v->view_src, a);
  EXPECT_EQ(v->view_offs, 2 * a->nb[1] + 8);
  EXPECT_FALSE(v->is_contiguous());
  // A view of a view is rooted at the source with offsets added.
  Tensor* vv = ops::view_1d(ctx, v, 2, 4);
  EXPECT_EQ(vv->view_src, a);
  EXPECT_EQ(vv->view_offs, v->view_offs + 4);
  expect_op_error("view", [&] { ops::view_2d(ctx, a, 10, 6, a->nb[1], 4); });  // 4 bytes past the end
  expect_op_error("view", [&] { ops::view_1d(ctx, a, 61, 0); });
  expect_op_error("view", [&] { ops::view_2d(ctx, a, 1, 2, SIZE_MAX / 2, 0); });  // stride overflow
  expect_op_error("view", [&] { ops::view_1d(ctx, a, 1, SIZE_MAX); });
  EXPECT_NO_THROW(ops::view_2d(ctx, a, 10, 6, a->nb[1], 0));
}

TEST(Views, PermuteAndReshape) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f16, {2, 3, 4, 5});
  Tensor* p = ops::permute(ctx, a, 2, 0, 1, 3);
  EXPECT_EQ(shape_string(*p), "f16[3,4,2,5]");
  EXPECT_EQ(p->nb[2], a->nb[0]);
  EXPECT_EQ(p->nb[0], a->nb[1]);
  Tensor* r = ops::reshape(ctx, a, {6, 20});
  EXPECT_TRUE(r->is_contiguous());
  EXPECT_EQ(r->nb[1], 12u);
  Tensor* c = ops::cont(ctx, p);
  EXPECT_TRUE(c->is_contiguous());
  EXPECT_EQ(c->view_src, nullptr);
}

}  // namespace
}  // namespace weft
