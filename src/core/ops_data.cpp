// Constructors of the data-movement ops: row gather/scatter, copies, concat.
#include "op_builder.h"
#include "weft/core/op_registry.h"
#include "weft/core/ops.h"

namespace weft::ops {
namespace {

using detail::new_alias;
using detail::new_result;
using detail::require;
using detail::require_dtype;
using detail::require_operand;
using detail::require_storage_dtype;
using detail::shapes;


}  // namespace

Tensor* get_rows(Context& ctx, Tensor* a, Tensor* idx) {
  constexpr Op op = Op::get_rows;
  require_operand(a, op, "a");
  require_operand(idx, op, "idx");
  require_storage_dtype(*a, op, "a", /*allow_i32=*/true);
  require_dtype(*idx, op, "idx", {DType::i32});
  require(a->rows_contiguous() && a->ne[3] == 1, op, "a " + shape_string(*a) + " must be [K, R, B] with packed rows");
  require(idx->ne[2] == 1 && idx->ne[3] == 1 && idx->ne[1] == a->ne[2], op,
          "idx " + shape_string(*idx) + " must be [n, B] for a " + shape_string(*a));
  return new_result(ctx, op, DType::f32, {a->ne[0], idx->ne[0], idx->ne[1], 1}, {a, idx});
}

Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* src, Tensor* idx) {
  constexpr Op op = Op::set_rows;
  require_operand(dst, op, "dst");
  require_operand(src, op, "src");
  require_operand(idx, op, "idx");
  require_storage_dtype(*dst, op, "dst");
  require_dtype(*src, op, "src", {DType::f32});
  require_dtype(*idx, op, "idx", {DType::i32});
  require(dst->rows_contiguous() && dst->ne[3] == 1, op,
          "dst " + shape_string(*dst) + " must be [K, R, B] with packed rows");
  require(src->ne[3] == 1 && src->ne[0] == dst->ne[0] && src->ne[2] == dst->ne[2], op,
          "src " + shape_string(*src) + " does not fit dst " + shape_string(*dst));
  require(idx->ne[2] == 1 && idx->ne[3] == 1 && idx->ne[0] == src->ne[1] && idx->ne[1] == src->ne[2], op,
          "idx " + shape_string(*idx) + " must be [n, B] for src " + shape_string(*src));
  return new_alias(ctx, op, dst, {dst, src, idx});
}

Tensor* routed_rows(Context& ctx, Tensor* x, Tensor* ids, int32_t first, int32_t count) {
  constexpr Op op = Op::routed_rows;
  require_operand(x, op, "x");
  require_operand(ids, op, "ids");
  require_dtype(*x, op, "x", {DType::f32});
  require_dtype(*ids, op, "ids", {DType::i32});
  require(x->rows_contiguous() && x->ne[2] == 1 && x->ne[3] == 1, op,
          "x " + shape_string(*x) + " must be [K, n] with packed rows");
  require(ids->ne[2] == 1 && ids->ne[3] == 1 && ids->ne[1] == x->ne[1], op,
          "ids " + shape_string(*ids) + " must be [n_used, n] for x " + shape_string(*x));
  require(first >= 0 && count > 0 && count <= INT32_MAX - first, op,
          "experts [" + std::to_string(first) + ", +" + std::to_string(count) + ") is not a range of ids");
  Tensor* t = new_result(ctx, op, DType::f32, {x->ne[0], x->ne[1], 1, 1}, {x, ids});
  t->op_params[0] = first;
  t->op_params[1] = count;
  t->flags |= kFlagSparseRows;
  return t;
}

Tensor* cpy(Context& ctx, Tensor* a, Tensor* b) {
  constexpr Op op = Op::cpy;
  require_operand(a, op, "a");
  require_operand(b, op, "b");
  require(a->nelements() == b->nelements(), op, "element counts differ: " + shapes(*a, *b));
  if (a->type == DType::i32 || b->type == DType::i32) {
    require(a->type == b->type, op, "i32 copies only into i32: " + shapes(*a, *b));
  } else if (traits(a->type).quantized) {  // dequantized, whole packed rows into packed f32 rows
    require(b->type == DType::f32 && same_shape(*a, *b) && a->rows_contiguous() && b->is_contiguous(), op,
            "a quantized source goes whole into a packed f32 tensor of its shape: " + shapes(*a, *b));
  } else {
    require_dtype(*a, op, "a", {DType::f32, DType::f16, DType::bf16});
  }
  if (traits(b->type).quantized) {
    require(same_shape(*a, *b) && b->rows_contiguous(), op,
            "a quantized destination needs the same shape and packed rows: " + shapes(*a, *b));
  }
  return new_alias(ctx, op, b, {a, b});
}

Tensor* cont(Context& ctx, Tensor* a) {
  require_operand(a, Op::cont, "a");
  require(!traits(a->type).quantized || a->rows_contiguous(), Op::cont,
          "rows of quantized " + shape_string(*a) + " are not packed");
  return new_result(ctx, Op::cont, a->type, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim) {
  constexpr Op op = Op::concat;
  require_operand(a, op, "a");
  require_operand(b, op, "b");
  require(dim >= 0 && dim < kMaxDims, op, "dim " + std::to_string(dim) + " is outside [0, 3]");
  require(a->type == b->type && !traits(a->type).quantized, op,
          "operands must share a non-quantized dtype: " + shapes(*a, *b));
  int64_t ne[kMaxDims];
  for (int i = 0; i < kMaxDims; ++i) {
    require(i == dim || a->ne[i] == b->ne[i], op, "dims other than " + std::to_string(dim) + " differ: " + shapes(*a, *b));
    ne[i] = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
  }
  Tensor* r = new_result(ctx, op, a->type, {ne[0], ne[1], ne[2], ne[3]}, {a, b});
  r->set_param_i32(0, dim);
  return r;
}

}  // namespace weft::ops

// Rebuild adapters (weft/core/op_registry.h): the constructors above applied
// to a received node's sources and parameters.
namespace weft::detail {

Tensor* rebuild_get_rows(Context& c, const OpArgs& a) { return ops::get_rows(c, a.src[0], a.src[1]); }
Tensor* rebuild_set_rows(Context& c, const OpArgs& a) { return ops::set_rows(c, a.src[0], a.src[1], a.src[2]); }
Tensor* rebuild_routed_rows(Context& c, const OpArgs& a) { return ops::routed_rows(c, a.src[0], a.src[1], a.i32(0), a.i32(1)); }
Tensor* rebuild_cpy(Context& c, const OpArgs& a) { return ops::cpy(c, a.src[0], a.src[1]); }
Tensor* rebuild_cont(Context& c, const OpArgs& a) { return ops::cont(c, a.src[0]); }
Tensor* rebuild_concat(Context& c, const OpArgs& a) { return ops::concat(c, a.src[0], a.src[1], a.i32(0)); }

}  // namespace weft::detail
