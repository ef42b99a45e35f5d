// Op constructors: result shapes, and errors that name the op and shapes.
#include <gtest/gtest.h>

#include <cmath>
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

// Expects fn to throw invalid_input starting "[op]" and naming each of words.
template <typename Fn>
void expect_op_error_naming(const std::string& op, std::initializer_list<const char*> words, Fn fn) {
  try {
    fn();
    ADD_FAILURE() << "no error from " << op;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << what;
    EXPECT_EQ(what.rfind("[" + op + "]", 0), 0u) << what;
    for (const char* w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' not in: " << what;
  }
}

TEST(OpShapes, ActivationsOfNewFamilies) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::bf16, {5, 3, 2});
  for (Tensor* r : {ops::gelu_erf(ctx, a), ops::sigmoid(ctx, a), ops::softcap(ctx, a, 30.0f)}) {
    EXPECT_EQ(shape_string(*r), "bf16[5,3,2,1]");
    EXPECT_EQ(r->src[0], a);
  }
  EXPECT_EQ(ops::softcap(ctx, a, 30.0f)->param_f32(0), 30.0f);
  // A transposed (non-contiguous) operand is fine; the result is packed.
  Tensor* t = ops::sigmoid(ctx, ops::transpose(ctx, ctx.new_tensor(DType::f32, {4, 6})));
  EXPECT_EQ(shape_string(*t), "f32[6,4,1,1]");
  EXPECT_TRUE(t->is_contiguous());
  for (DType bad : {DType::i32, DType::q8_0}) {
    Tensor* x = ctx.new_tensor(bad, {32});
    expect_op_error("gelu_erf", [&] { ops::gelu_erf(ctx, x); });
    expect_op_error("sigmoid", [&] { ops::sigmoid(ctx, x); });
    expect_op_error("softcap", [&] { ops::softcap(ctx, x, 1.0f); });
  }
  expect_op_error_naming("sigmoid", {"missing operand a"}, [&] { ops::sigmoid(ctx, nullptr); });
  for (float cap : {0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN}) {
    expect_op_error_naming("softcap", {"cap must be finite and > 0"}, [&] { ops::softcap(ctx, a, cap); });
  }
}

TEST(OpShapes, RopeExtParametersAndFactors) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {16, 4, 3});
  Tensor* pos = ctx.new_tensor(DType::i32, {3});
  Tensor* ff = ctx.new_tensor(DType::f32, {6});
  Tensor* r = ops::rope_ext(ctx, a, pos, ff, 12, RopeMode::neox, 5e5f, {0.25f, 1.5f});
  EXPECT_EQ(shape_string(*r), "f32[16,4,3,1]");
  EXPECT_EQ(r->op, Op::rope_ext);
  EXPECT_EQ(r->src[0], a);
  EXPECT_EQ(r->src[1], pos);
  EXPECT_EQ(r->src[2], ff);
  EXPECT_EQ(r->param_i32(0), 12);
  EXPECT_EQ(r->param_i32(1), static_cast<int32_t>(RopeMode::neox));
  EXPECT_EQ(r->param_f32(2), 5e5f);
  EXPECT_EQ(r->param_f32(3), 0.25f);
  EXPECT_EQ(r->param_f32(4), 1.5f);
  // Defaults: no factors, freq_scale and attn_factor 1.
  Tensor* d = ops::rope_ext(ctx, a, pos, nullptr, 16, RopeMode::normal, 1e4f);
  EXPECT_EQ(d->src[2], nullptr);
  EXPECT_EQ(d->param_f32(3), 1.0f);
  EXPECT_EQ(d->param_f32(4), 1.0f);
  // a may be a view (some heads of a fused projection); factors a contiguous view.
  Tensor* fused = ctx.new_tensor(DType::f32, {16, 7, 3});
  Tensor* heads = ops::view_3d(ctx, fused, 16, 4, 3, fused->nb[1], fused->nb[2], fused->nb[1]);
  Tensor* ff_view = ops::view_1d(ctx, ctx.new_tensor(DType::f32, {10}), 6, 8);
  EXPECT_NO_THROW(ops::rope_ext(ctx, heads, pos, ff_view, 12, RopeMode::normal, 1e4f));

  auto ext = [&](Tensor* factors, int n_dims, float base, ops::RopeScaling s) {
    return ops::rope_ext(ctx, a, pos, factors, n_dims, RopeMode::normal, base, s);
  };
  for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    expect_op_error_naming("rope_ext", {"freq_base must be finite and > 0"}, [&] { ext(ff, 12, bad, {}); });
    expect_op_error_naming("rope_ext", {"freq_scale must be finite and > 0"}, [&] { ext(ff, 12, 1e4f, {bad, 1.0f}); });
    expect_op_error_naming("rope_ext", {"attn_factor must be finite and > 0"},
                           [&] { ext(ff, 12, 1e4f, {1.0f, bad}); });
  }
  expect_op_error_naming("rope_ext", {"freq_factors", "f32[6,1,1,1]", "[5]"}, [&] { ext(ff, 10, 1e4f, {}); });
  expect_op_error_naming("rope_ext", {"freq_factors", "expected dtype f32"},
                         [&] { ext(ctx.new_tensor(DType::f16, {6}), 12, 1e4f, {}); });
  expect_op_error_naming("rope_ext", {"freq_factors", "f32[3,2,1,1]"},
                         [&] { ext(ctx.new_tensor(DType::f32, {3, 2}), 12, 1e4f, {}); });
  Tensor* gappy = ops::view_1d(ctx, ctx.new_tensor(DType::f32, {12}), 6, 0);
  gappy->nb[0] = 8;  // every other float: not contiguous
  expect_op_error_naming("rope_ext", {"freq_factors", "contiguous"}, [&] { ext(gappy, 12, 1e4f, {}); });
  // The rules rope_ext shares with rope name rope_ext.
  expect_op_error_naming("rope_ext", {"n_dims 7"}, [&] { ext(nullptr, 7, 1e4f, {}); });
  expect_op_error_naming("rope_ext", {"n_dims 18"}, [&] { ext(nullptr, 18, 1e4f, {}); });
  Tensor* short_pos = ctx.new_tensor(DType::i32, {2});
  expect_op_error_naming("rope_ext", {"pos"},
                         [&] { ops::rope_ext(ctx, a, short_pos, nullptr, 8, RopeMode::neox, 1e4f); });
  expect_op_error_naming("rope_ext", {"unknown mode 2"},
                         [&] { ops::rope_ext(ctx, a, pos, nullptr, 8, static_cast<RopeMode>(2), 1e4f); });
  Tensor* a16 = ctx.new_tensor(DType::f16, {16, 4, 3});
  expect_op_error_naming("rope_ext", {"a is"},
                         [&] { ops::rope_ext(ctx, a16, pos, nullptr, 8, RopeMode::neox, 1e4f); });
  expect_op_error_naming("rope_ext", {"missing operand pos"},
                         [&] { ops::rope_ext(ctx, a, nullptr, nullptr, 8, RopeMode::neox, 1e4f); });
}

TEST(OpShapes, FlashAttnShapesAndParameters) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::f32, {32, 5, 8});   // hd, n_q, heads
  Tensor* k = ctx.new_tensor(DType::f16, {32, 40, 2});  // hd, n_kv, kv heads
  Tensor* v = ctx.new_tensor(DType::f16, {24, 40, 2});  // dv, n_kv, kv heads
  Tensor* mask = ctx.new_tensor(DType::f32, {40, 8});
  Tensor* r = ops::flash_attn(ctx, q, k, v, mask, 0.125f, 30.0f);
  EXPECT_EQ(shape_string(*r), "f32[24,8,5,1]");  // dv, heads, n_q
  EXPECT_EQ(r->op, Op::flash_attn);
  EXPECT_EQ(r->src[3], mask);
  EXPECT_EQ(r->param_f32(0), 0.125f);
  EXPECT_EQ(r->param_f32(1), 30.0f);
  EXPECT_EQ(ops::flash_attn(ctx, q, k, v, nullptr, 1.0f)->param_f32(1), 0.0f);
  // q as a permuted view, k and v as views of a cache's rows.
  Tensor* qp = ops::permute(ctx, ctx.new_tensor(DType::f32, {32, 8, 5}), 0, 2, 1, 3);
  Tensor* cache = ctx.new_tensor(DType::f16, {64, 100});
  const int64_t ne[3] = {32, 40, 2};
  const size_t nb[3] = {2, cache->nb[1], 64};
  Tensor* kc = ops::view(ctx, cache, ne, nb, 0);
  EXPECT_NO_THROW(ops::flash_attn(ctx, qp, kc, kc, mask, 1.0f));

  expect_op_error_naming("flash_attn", {"heads are not a multiple"},
                         [&] { ops::flash_attn(ctx, ctx.new_tensor(DType::f32, {32, 5, 7}), k, v, mask, 1.0f); });
  expect_op_error_naming("flash_attn", {"head size"},
                         [&] { ops::flash_attn(ctx, ctx.new_tensor(DType::f32, {16, 5, 8}), k, v, mask, 1.0f); });
  expect_op_error_naming("flash_attn", {"does not match k"},
                         [&] { ops::flash_attn(ctx, q, k, ctx.new_tensor(DType::f16, {24, 39, 2}), mask, 1.0f); });
  expect_op_error_naming("flash_attn", {"mask", "f32[40,4,1,1]"},
                         [&] { ops::flash_attn(ctx, q, k, v, ctx.new_tensor(DType::f32, {40, 4}), 1.0f); });
  expect_op_error_naming("flash_attn", {"mask"},
                         [&] { ops::flash_attn(ctx, q, k, v, ctx.new_tensor(DType::f16, {40, 8}), 1.0f); });
  expect_op_error_naming("flash_attn", {"k is"},
                         [&] { ops::flash_attn(ctx, q, ctx.new_tensor(DType::q4_0, {32, 40, 2}), v, mask, 1.0f); });
  // A q8_0 cache's rows are taken (whole blocks per head).
  EXPECT_NO_THROW(ops::flash_attn(ctx, q, ctx.new_tensor(DType::q8_0, {32, 40, 2}),
                                  ctx.new_tensor(DType::q8_0, {32, 40, 2}), mask, 1.0f));
  expect_op_error_naming("flash_attn", {"q is"},
                         [&] { ops::flash_attn(ctx, ctx.new_tensor(DType::f16, {32, 5, 8}), k, v, mask, 1.0f); });
  Tensor* no_heads = ctx.new_tensor(DType::f16, {32, 40, 0});
  expect_op_error_naming("flash_attn", {"heads are not a multiple"},
                         [&] { ops::flash_attn(ctx, q, no_heads, no_heads, mask, 1.0f); });
  expect_op_error_naming("flash_attn", {"packed rows"},
                         [&] { ops::flash_attn(ctx, ops::transpose(ctx, ctx.new_tensor(DType::f32, {5, 32, 8})), k, v,
                                               mask, 1.0f); });
  for (float bad : {INFINITY, NAN}) {
    expect_op_error_naming("flash_attn", {"scale must be finite"}, [&] { ops::flash_attn(ctx, q, k, v, mask, bad); });
    expect_op_error_naming("flash_attn", {"softcap must be finite"},
                           [&] { ops::flash_attn(ctx, q, k, v, mask, 1.0f, bad); });
  }
  expect_op_error_naming("flash_attn", {"softcap must be finite and >= 0"},
                         [&] { ops::flash_attn(ctx, q, k, v, mask, 1.0f, -1.0f); });
  expect_op_error_naming("flash_attn", {"missing operand v"},
                         [&] { ops::flash_attn(ctx, q, k, nullptr, mask, 1.0f); });
}

TEST(OpShapes, AttentionSinks) {
  Context ctx;
  // soft_max: one f32 sink per index of dim 2, packed.
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4, 3});
  Tensor* sinks = ctx.new_tensor(DType::f32, {3});
  Tensor* r = ops::soft_max(ctx, a, nullptr, 1.0f, sinks);
  EXPECT_EQ(r->src[2], sinks);
  EXPECT_TRUE(same_shape(*r, *a));
  expect_op_error_naming("soft_max", {"sinks f32[4,1,1,1]", "[3]"},
                         [&] { ops::soft_max(ctx, a, nullptr, 1.0f, ctx.new_tensor(DType::f32, {4})); });
  expect_op_error_naming("soft_max", {"sinks is f16"},
                         [&] { ops::soft_max(ctx, a, nullptr, 1.0f, ctx.new_tensor(DType::f16, {3})); });
  expect_op_error_naming("soft_max", {"sinks f32[3,2,1,1]"},
                         [&] { ops::soft_max(ctx, a, nullptr, 1.0f, ctx.new_tensor(DType::f32, {3, 2})); });
  // flash_attn: one per head of q, the fifth source.
  Tensor* q = ctx.new_tensor(DType::f32, {32, 5, 8});
  Tensor* k = ctx.new_tensor(DType::f16, {32, 40, 2});
  Tensor* v = ctx.new_tensor(DType::f16, {32, 40, 2});
  Tensor* mask = ctx.new_tensor(DType::f32, {40, 5});
  Tensor* s8 = ctx.new_tensor(DType::f32, {8});
  Tensor* fa = ops::flash_attn(ctx, q, k, v, mask, 1.0f, 0.0f, s8);
  EXPECT_EQ(fa->src[4], s8);
  EXPECT_EQ(fa->ne[0], 32);
  EXPECT_EQ(fa->ne[1], 8);
  expect_op_error_naming("flash_attn", {"sinks", "one per head"},
                         [&] { ops::flash_attn(ctx, q, k, v, mask, 1.0f, 0.0f, ctx.new_tensor(DType::f32, {2})); });
  expect_op_error_naming("flash_attn", {"sinks is i32"},
                         [&] { ops::flash_attn(ctx, q, k, v, mask, 1.0f, 0.0f, ctx.new_tensor(DType::i32, {8})); });
}

TEST(OpShapes, SwigluOai) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {8, 4});
  Tensor* b = ctx.new_tensor(DType::f16, {8, 4});
  Tensor* r = ops::swiglu_oai(ctx, a, b, 1.702f, 7.0f);
  EXPECT_EQ(r->op, Op::swiglu_oai);
  EXPECT_TRUE(same_shape(*r, *a));
  EXPECT_EQ(r->type, DType::f32);
  EXPECT_EQ(r->param_f32(0), 1.702f);
  EXPECT_EQ(r->param_f32(1), 7.0f);
  EXPECT_EQ(ops::swiglu_oai(ctx, b, a, 1.0f, 1.0f)->type, DType::f16);
  expect_op_error_naming("swiglu_oai", {"shapes differ"},
                         [&] { ops::swiglu_oai(ctx, a, ctx.new_tensor(DType::f32, {8, 3}), 1.702f, 7.0f); });
  expect_op_error_naming("swiglu_oai", {"b is i32"},
                         [&] { ops::swiglu_oai(ctx, a, ctx.new_tensor(DType::i32, {8, 4}), 1.702f, 7.0f); });
  expect_op_error_naming("swiglu_oai", {"alpha must be finite"}, [&] { ops::swiglu_oai(ctx, a, b, NAN, 7.0f); });
  for (float bad : {0.0f, -1.0f, INFINITY, NAN})
    expect_op_error_naming("swiglu_oai", {"limit"}, [&] { ops::swiglu_oai(ctx, a, b, 1.702f, bad); });
  expect_op_error_naming("swiglu_oai", {"missing operand b"}, [&] { ops::swiglu_oai(ctx, a, nullptr, 1.0f, 1.0f); });
}

TEST(OpShapes, RoutedRowsShapesAndRange) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {8, 5});
  Tensor* ids = ctx.new_tensor(DType::i32, {2, 5});
  Tensor* r = ops::routed_rows(ctx, x, ids, 3, 2);
  EXPECT_TRUE(same_shape(*r, *x));
  EXPECT_EQ(r->param_i32(0), 3);
  EXPECT_EQ(r->param_i32(1), 2);
  EXPECT_TRUE(r->has_flag(kFlagSparseRows));
  expect_op_error_naming("routed_rows", {"ids", "i32[2,4,1,1]"},
                         [&] { ops::routed_rows(ctx, x, ctx.new_tensor(DType::i32, {2, 4}), 0, 1); });
  expect_op_error_naming("routed_rows", {"x"},
                         [&] { ops::routed_rows(ctx, ctx.new_tensor(DType::f32, {8, 5, 2}), ids, 0, 1); });
  expect_op_error_naming("routed_rows", {"x"}, [&] { ops::routed_rows(ctx, ops::transpose(ctx, x), ids, 0, 1); });
  expect_op_error_naming("routed_rows", {"ids"},
                         [&] { ops::routed_rows(ctx, x, ctx.new_tensor(DType::f32, {2, 5}), 0, 1); });
  expect_op_error_naming("routed_rows", {"experts [-1"}, [&] { ops::routed_rows(ctx, x, ids, -1, 2); });
  expect_op_error_naming("routed_rows", {"experts [2, +0)"}, [&] { ops::routed_rows(ctx, x, ids, 2, 0); });
  expect_op_error_naming("routed_rows", {"experts"}, [&] { ops::routed_rows(ctx, x, ids, INT32_MAX, 2); });
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
