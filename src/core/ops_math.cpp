// Constructors of the math ops: elementwise, row-wise, reductions, products.
#include <cmath>
#include <cstdio>
#include <string>

#include "op_builder.h"
#include "weft/core/op_registry.h"
#include "weft/core/ops.h"

namespace weft::ops {
namespace {

using detail::new_result;
using detail::require;
using detail::require_dtype;
using detail::require_operand;
using detail::require_storage_dtype;
using detail::shapes;

constexpr std::initializer_list<DType> kFloatTypes = {DType::f32, DType::f16, DType::bf16};

Tensor* same_shape_result(Context& ctx, Op op, DType type, const Tensor& a, std::initializer_list<Tensor*> srcs) {
  return new_result(ctx, op, type, {a.ne[0], a.ne[1], a.ne[2], a.ne[3]}, srcs);
}

Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  require_operand(a, op, "a");
  require_operand(b, op, "b");
  require_dtype(*a, op, "a", kFloatTypes);
  require_dtype(*b, op, "b", kFloatTypes);
  // b broadcasts over a: in each dim a's size is a positive multiple of b's
  // (0 % n == 0 is not enough: a kernel would read n elements of b per empty
  // row of a). The one zero-sized case allowed is deliberate and reads nothing:
  // a dim where both are 0, which makes the result empty.
  for (int i = 0; i < kMaxDims; ++i) {
    const bool both_empty = a->ne[i] == 0 && b->ne[i] == 0;
    require(both_empty || (b->ne[i] > 0 && a->ne[i] >= b->ne[i] && a->ne[i] % b->ne[i] == 0), op,
            "cannot broadcast " + shapes(*b, *a) + ": each dim of a must be a positive multiple of b's");
  }
  return same_shape_result(ctx, op, a->type, *a, {a, b});
}

Tensor* unary(Context& ctx, Op op, Tensor* a) {
  require_operand(a, op, "a");
  require_dtype(*a, op, "a", kFloatTypes);
  return same_shape_result(ctx, op, a->type, *a, {a});
}

std::string number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

void require_positive(Op op, const char* which, float v) {
  require(std::isfinite(v) && v > 0.0f, op, std::string(which) + " must be finite and > 0, got " + number(v));
}

// The operand rules rope and rope_ext share. a: f32 [head_dim, n_head,
// n_tokens, 1]; pos: i32 [n_tokens]; n_dims even, in (0, head_dim].
void check_rope(Op op, const Tensor* a, const Tensor* pos, int n_dims, RopeMode mode) {
  require_operand(a, op, "a");
  require_operand(pos, op, "pos");
  require_dtype(*a, op, "a", {DType::f32});
  require_dtype(*pos, op, "pos", {DType::i32});
  require(a->ne[3] == 1, op, "a must be [head_dim, n_head, n_tokens, 1], got " + shape_string(*a));
  require(pos->ne[0] == a->ne[2] && pos->nelements() == pos->ne[0], op,
          "pos " + shape_string(*pos) + " must be [n_tokens] for " + shape_string(*a));
  require(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0], op,
          "n_dims " + std::to_string(n_dims) + " must be even and in (0, " + std::to_string(a->ne[0]) + "]");
  require(mode == RopeMode::normal || mode == RopeMode::neox, op,
          "unknown mode " + std::to_string(static_cast<int>(mode)));
}

Tensor* f32_rowwise(Context& ctx, Op op, Tensor* a) {
  require_operand(a, op, "a");
  require_dtype(*a, op, "a", {DType::f32});
  return same_shape_result(ctx, op, DType::f32, *a, {a});
}

}  // namespace

Tensor* add(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::add, a, b); }
Tensor* sub(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::sub, a, b); }
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::mul, a, b); }
Tensor* div(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::div, a, b); }

Tensor* scale(Context& ctx, Tensor* a, float s) {
  Tensor* r = unary(ctx, Op::scale, a);
  r->set_param_f32(0, s);
  return r;
}
Tensor* sqr(Context& ctx, Tensor* a) { return unary(ctx, Op::sqr, a); }
Tensor* sqrt(Context& ctx, Tensor* a) { return unary(ctx, Op::sqrt, a); }
Tensor* silu(Context& ctx, Tensor* a) { return unary(ctx, Op::silu, a); }
Tensor* gelu(Context& ctx, Tensor* a) { return unary(ctx, Op::gelu, a); }
Tensor* gelu_erf(Context& ctx, Tensor* a) { return unary(ctx, Op::gelu_erf, a); }
Tensor* sigmoid(Context& ctx, Tensor* a) { return unary(ctx, Op::sigmoid, a); }

Tensor* softcap(Context& ctx, Tensor* a, float cap) {
  require_positive(Op::softcap, "cap", cap);
  Tensor* r = unary(ctx, Op::softcap, a);
  r->set_param_f32(0, cap);
  return r;
}

Tensor* swiglu(Context& ctx, Tensor* a, Tensor* b) {
  require_operand(a, Op::swiglu, "a");
  require_operand(b, Op::swiglu, "b");
  require_dtype(*a, Op::swiglu, "a", kFloatTypes);
  require_dtype(*b, Op::swiglu, "b", kFloatTypes);
  require(same_shape(*a, *b), Op::swiglu, "shapes differ: " + shapes(*a, *b));
  return same_shape_result(ctx, Op::swiglu, a->type, *a, {a, b});
}

Tensor* swiglu_oai(Context& ctx, Tensor* a, Tensor* b, float alpha, float limit) {
  constexpr Op op = Op::swiglu_oai;
  require_operand(a, op, "a");
  require_operand(b, op, "b");
  require_dtype(*a, op, "a", kFloatTypes);
  require_dtype(*b, op, "b", kFloatTypes);
  require(same_shape(*a, *b), op, "shapes differ: " + shapes(*a, *b));
  require(std::isfinite(alpha), op, "alpha must be finite, got " + std::to_string(alpha));
  require_positive(op, "limit", limit);
  Tensor* r = same_shape_result(ctx, op, a->type, *a, {a, b});
  r->set_param_f32(0, alpha);
  r->set_param_f32(1, limit);
  return r;
}

Tensor* rms_norm(Context& ctx, Tensor* a, float eps) {
  Tensor* r = f32_rowwise(ctx, Op::rms_norm, a);
  r->set_param_f32(0, eps);
  return r;
}

Tensor* norm(Context& ctx, Tensor* a, float eps) {
  Tensor* r = f32_rowwise(ctx, Op::norm, a);
  r->set_param_f32(0, eps);
  return r;
}

Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask, float scale, Tensor* sinks) {
  constexpr Op op = Op::soft_max;
  require_operand(a, op, "a");
  require_dtype(*a, op, "a", {DType::f32});
  if (mask != nullptr) {
    require_dtype(*mask, op, "mask", {DType::f32, DType::f16});
    require(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
            op, "mask " + shape_string(*mask) + " does not fit " + shape_string(*a));
  }
  if (sinks != nullptr) {
    require_dtype(*sinks, op, "sinks", {DType::f32});
    require(sinks->is_contiguous() && sinks->ne[0] == a->ne[2] && sinks->nrows() == 1, op,
            "sinks " + shape_string(*sinks) + " must be packed [" + std::to_string(a->ne[2]) + "], one per index of dim 2 of " +
                shape_string(*a));
  }
  Tensor* r = same_shape_result(ctx, op, DType::f32, *a, {a, mask, sinks});
  r->set_param_f32(0, scale);
  return r;
}

Tensor* rope(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode, float freq_base) {
  constexpr Op op = Op::rope;
  check_rope(op, a, pos, n_dims, mode);
  require(freq_base > 0.0f, op, "freq_base must be positive, got " + std::to_string(freq_base));
  Tensor* r = same_shape_result(ctx, op, DType::f32, *a, {a, pos});
  r->set_param_i32(0, n_dims);
  r->set_param_i32(1, static_cast<int32_t>(mode));
  r->set_param_f32(2, freq_base);
  return r;
}

Tensor* rope_ext(Context& ctx, Tensor* a, Tensor* pos, Tensor* freq_factors, int n_dims, RopeMode mode,
                 float freq_base, RopeScaling scaling) {
  constexpr Op op = Op::rope_ext;
  check_rope(op, a, pos, n_dims, mode);
  require_positive(op, "freq_base", freq_base);
  require_positive(op, "freq_scale", scaling.freq_scale);
  require_positive(op, "attn_factor", scaling.attn_factor);
  if (freq_factors != nullptr) {
    require_dtype(*freq_factors, op, "freq_factors", {DType::f32});
    require(freq_factors->is_contiguous() && freq_factors->ne[0] == n_dims / 2 &&
                freq_factors->nelements() == freq_factors->ne[0],
            op,
            "freq_factors " + shape_string(*freq_factors) + " must be contiguous [" + std::to_string(n_dims / 2) +
                "] (n_dims / 2)");
  }
  Tensor* r = same_shape_result(ctx, op, DType::f32, *a, {a, pos, freq_factors});
  r->set_param_i32(0, n_dims);
  r->set_param_i32(1, static_cast<int32_t>(mode));
  r->set_param_f32(2, freq_base);
  r->set_param_f32(3, scaling.freq_scale);
  r->set_param_f32(4, scaling.attn_factor);
  return r;
}

Tensor* sum_rows(Context& ctx, Tensor* a) {
  require_operand(a, Op::sum_rows, "a");
  require_dtype(*a, Op::sum_rows, "a", {DType::f32});
  return new_result(ctx, Op::sum_rows, DType::f32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* argmax(Context& ctx, Tensor* a) {
  require_operand(a, Op::argmax, "a");
  require_dtype(*a, Op::argmax, "a", {DType::f32});
  require(a->ne[0] > 0, Op::argmax, "empty rows in " + shape_string(*a));
  return new_result(ctx, Op::argmax, DType::i32, {a->ne[1], a->ne[2], a->ne[3], 1}, {a});
}

Tensor* argsort(Context& ctx, Tensor* a, SortOrder order) {
  require_operand(a, Op::argsort, "a");
  require_dtype(*a, Op::argsort, "a", {DType::f32});
  require(order == SortOrder::ascending || order == SortOrder::descending, Op::argsort,
          "unknown order " + std::to_string(static_cast<int>(order)));
  require(a->ne[0] <= INT32_MAX, Op::argsort, "rows too long in " + shape_string(*a));
  Tensor* r = same_shape_result(ctx, Op::argsort, DType::i32, *a, {a});
  r->set_param_i32(0, static_cast<int32_t>(order));
  return r;
}

Tensor* top_k(Context& ctx, Tensor* a, int k) {
  require_operand(a, Op::top_k, "a");
  require_dtype(*a, Op::top_k, "a", {DType::f32});
  require(a->ne[0] <= INT32_MAX, Op::top_k, "rows too long in " + shape_string(*a));
  require(k > 0 && k <= a->ne[0], Op::top_k,
          "k " + std::to_string(k) + " is outside [1, " + std::to_string(a->ne[0]) + "]");
  Tensor* r = new_result(ctx, Op::top_k, DType::i32, {k, a->ne[1], a->ne[2], a->ne[3]}, {a});
  r->set_param_i32(0, k);
  return r;
}

Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b) {
  constexpr Op op = Op::mul_mat;
  require_operand(a, op, "a");
  require_operand(b, op, "b");
  require_storage_dtype(*a, op, "a");
  require_dtype(*b, op, "b", {DType::f32});
  require(a->rows_contiguous(), op, "rows of a " + shape_string(*a) + " are not packed");
  require(a->ne[0] == b->ne[0], op, "inner dimensions differ: " + shapes(*a, *b));
  require(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, op,
          "cannot broadcast " + shapes(*a, *b));
  return new_result(ctx, op, DType::f32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
}

Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids, int32_t id_base) {
  constexpr Op op = Op::mul_mat_id;
  require_operand(as, op, "as");
  require_operand(b, op, "b");
  require_operand(ids, op, "ids");
  require_storage_dtype(*as, op, "as");
  require_dtype(*b, op, "b", {DType::f32});
  require_dtype(*ids, op, "ids", {DType::i32});
  require(as->rows_contiguous() && as->ne[3] == 1, op,
          "as " + shape_string(*as) + " must be [K, M, n_expert] with packed rows");
  require(ids->ne[2] == 1 && ids->ne[3] == 1, op, "ids " + shape_string(*ids) + " must be [n_used, n_tokens]");
  require(b->ne[3] == 1 && b->ne[0] == as->ne[0] && b->ne[2] == ids->ne[1] &&
              (b->ne[1] == 1 || b->ne[1] == ids->ne[0]),
          op, "b " + shape_string(*b) + " does not fit as " + shape_string(*as) + " and ids " + shape_string(*ids));
  Tensor* t = new_result(ctx, op, DType::f32, {as->ne[1], ids->ne[0], ids->ne[1], 1}, {as, b, ids});
  t->op_params[0] = id_base;
  return t;
}

}  // namespace weft::ops

// Rebuild adapters (weft/core/op_registry.h): the constructors above applied
// to a received node's sources and parameters.
namespace weft::detail {

Tensor* rebuild_add(Context& c, const OpArgs& a) { return ops::add(c, a.src[0], a.src[1]); }
Tensor* rebuild_sub(Context& c, const OpArgs& a) { return ops::sub(c, a.src[0], a.src[1]); }
Tensor* rebuild_mul(Context& c, const OpArgs& a) { return ops::mul(c, a.src[0], a.src[1]); }
Tensor* rebuild_div(Context& c, const OpArgs& a) { return ops::div(c, a.src[0], a.src[1]); }
Tensor* rebuild_scale(Context& c, const OpArgs& a) { return ops::scale(c, a.src[0], a.f32(0)); }
Tensor* rebuild_sqr(Context& c, const OpArgs& a) { return ops::sqr(c, a.src[0]); }
Tensor* rebuild_sqrt(Context& c, const OpArgs& a) { return ops::sqrt(c, a.src[0]); }
Tensor* rebuild_silu(Context& c, const OpArgs& a) { return ops::silu(c, a.src[0]); }
Tensor* rebuild_gelu(Context& c, const OpArgs& a) { return ops::gelu(c, a.src[0]); }
Tensor* rebuild_gelu_erf(Context& c, const OpArgs& a) { return ops::gelu_erf(c, a.src[0]); }
Tensor* rebuild_sigmoid(Context& c, const OpArgs& a) { return ops::sigmoid(c, a.src[0]); }
Tensor* rebuild_softcap(Context& c, const OpArgs& a) { return ops::softcap(c, a.src[0], a.f32(0)); }
Tensor* rebuild_swiglu(Context& c, const OpArgs& a) { return ops::swiglu(c, a.src[0], a.src[1]); }
Tensor* rebuild_swiglu_oai(Context& c, const OpArgs& a) { return ops::swiglu_oai(c, a.src[0], a.src[1], a.f32(0), a.f32(1)); }
Tensor* rebuild_rms_norm(Context& c, const OpArgs& a) { return ops::rms_norm(c, a.src[0], a.f32(0)); }
Tensor* rebuild_norm(Context& c, const OpArgs& a) { return ops::norm(c, a.src[0], a.f32(0)); }
Tensor* rebuild_soft_max(Context& c, const OpArgs& a) { return ops::soft_max(c, a.src[0], a.src[1], a.f32(0), a.src[2]); }
Tensor* rebuild_rope(Context& c, const OpArgs& a) { return ops::rope(c, a.src[0], a.src[1], a.i32(0), static_cast<RopeMode>(a.i32(1)), a.f32(2)); }
Tensor* rebuild_rope_ext(Context& c, const OpArgs& a) {
  return ops::rope_ext(c, a.src[0], a.src[1], a.src[2], a.i32(0), static_cast<RopeMode>(a.i32(1)), a.f32(2),
                       {a.f32(3), a.f32(4)});
}
Tensor* rebuild_sum_rows(Context& c, const OpArgs& a) { return ops::sum_rows(c, a.src[0]); }
Tensor* rebuild_argmax(Context& c, const OpArgs& a) { return ops::argmax(c, a.src[0]); }
Tensor* rebuild_argsort(Context& c, const OpArgs& a) { return ops::argsort(c, a.src[0], static_cast<SortOrder>(a.i32(0))); }
Tensor* rebuild_top_k(Context& c, const OpArgs& a) { return ops::top_k(c, a.src[0], a.i32(0)); }
Tensor* rebuild_mul_mat(Context& c, const OpArgs& a) { return ops::mul_mat(c, a.src[0], a.src[1]); }
Tensor* rebuild_mul_mat_id(Context& c, const OpArgs& a) { return ops::mul_mat_id(c, a.src[0], a.src[1], a.src[2], a.i32(0)); }

}  // namespace weft::detail
