// The fused attention op's constructor (include/weft/core/ops.h): every shape
// and parameter rule, shared by local graphs and graphs a worker receives.
#include <cmath>
#include <string>

#include "op_builder.h"
#include "weft/core/op_registry.h"
#include "weft/core/ops.h"

namespace weft::ops {

using namespace detail;

Tensor* flash_attn(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, float softcap,
                   Tensor* sinks) {
  constexpr Op op = Op::flash_attn;
  require_operand(q, op, "q");
  require_operand(k, op, "k");
  require_operand(v, op, "v");
  require_dtype(*q, op, "q", {DType::f32});
  require_dtype(*k, op, "k", {DType::f32, DType::f16, DType::q8_0});
  require_dtype(*v, op, "v", {DType::f32, DType::f16, DType::q8_0});
  // A q8_0 row of a head is whole blocks (a cache row of several heads
  // viewed per head: the head size is a multiple of the block).
  require(k->ne[0] % traits(k->type).block_size == 0 && v->ne[0] % traits(v->type).block_size == 0, op,
          "a quantized k or v needs rows of whole blocks (" + std::to_string(kQuantBlock) + " values): k " +
              shape_string(*k) + ", v " + shape_string(*v));
  require(q->nb[0] == sizeof(float) && k->nb[0] == traits(k->type).unit_bytes &&
              v->nb[0] == traits(v->type).unit_bytes,
          op, "q, k and v need packed rows (element step = dtype size)");
  require(q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1, op,
          "q, k, v must be 3-D: " + shape_string(*q) + ", " + shape_string(*k) + ", " + shape_string(*v));
  require(k->ne[0] == q->ne[0], op, "k " + shape_string(*k) + " and q " + shape_string(*q) + " differ in head size");
  require(v->ne[1] == k->ne[1] && v->ne[2] == k->ne[2], op,
          "v " + shape_string(*v) + " does not match k " + shape_string(*k) + " in positions and heads");
  require(k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0, op,
          "q's " + std::to_string(q->ne[2]) + " heads are not a multiple of k's " + std::to_string(k->ne[2]));
  if (mask != nullptr) {
    require_dtype(*mask, op, "mask", {DType::f32});
    require(mask->nb[0] == sizeof(float) && mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] == 1 &&
                mask->ne[3] == 1,
            op, "mask " + shape_string(*mask) + " must be [n_kv, >= n_q] for q " + shape_string(*q) + " and k " +
                    shape_string(*k));
  }
  require(std::isfinite(scale), op, "scale must be finite, got " + std::to_string(scale));
  require(std::isfinite(softcap) && softcap >= 0.0f, op,
          "softcap must be finite and >= 0 (0: none), got " + std::to_string(softcap));
  if (sinks != nullptr) {
    require_dtype(*sinks, op, "sinks", {DType::f32});
    require(sinks->is_contiguous() && sinks->ne[0] == q->ne[2] && sinks->nrows() == 1, op,
            "sinks " + shape_string(*sinks) + " must be packed [" + std::to_string(q->ne[2]) + "], one per head of q " +
                shape_string(*q));
  }
  Tensor* r = new_result(ctx, op, DType::f32, {v->ne[0], q->ne[2], q->ne[1], 1}, {q, k, v, mask, sinks});
  r->set_param_f32(0, scale);
  r->set_param_f32(1, softcap);
  return r;
}

}  // namespace weft::ops

// Rebuild adapters (weft/core/op_registry.h): the constructors above applied
// to a received node's sources and parameters.
namespace weft::detail {

Tensor* rebuild_flash_attn(Context& c, const OpArgs& a) {
  return ops::flash_attn(c, a.src[0], a.src[1], a.src[2], a.src[3], a.f32(0), a.f32(1), a.src[4]);
}

}  // namespace weft::detail
