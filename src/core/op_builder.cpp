#include "op_builder.h"

namespace weft::detail {

void require_dtype(const Tensor& t, Op op, const char* which, std::initializer_list<DType> allowed) {
  for (DType d : allowed) {
    if (t.type == d) return;
  }
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  op_fail(op, std::string(which) + " is " + shape_string(t) + "; expected dtype " + names);
}

void require_storage_dtype(const Tensor& t, Op op, const char* which, bool allow_i32) {
  if (t.type != DType::i32 || allow_i32) return;
  op_fail(op, std::string(which) + " is " + shape_string(t) + "; expected f32, f16, bf16 or a quantized dtype");
}

Tensor* new_result(Context& ctx, Op op, DType type, const int64_t (&ne)[kMaxDims],
                   std::initializer_list<Tensor*> srcs) {
  Tensor* r = ctx.new_tensor(type, {ne[0], ne[1], ne[2], ne[3]});
  r->op = op;
  int i = 0;
  for (Tensor* s : srcs) r->src[i++] = s;
  return r;
}

Tensor* new_alias(Context& ctx, Op op, Tensor* base, std::initializer_list<Tensor*> srcs) {
  Tensor* r = ctx.new_node();
  r->type = base->type;
  for (int i = 0; i < kMaxDims; ++i) {
    r->ne[i] = base->ne[i];
    r->nb[i] = base->nb[i];
  }
  r->op = op;
  r->view_src = base->view_src ? base->view_src : base;
  r->view_offs = base->view_src ? base->view_offs : 0;
  int i = 0;
  for (Tensor* s : srcs) r->src[i++] = s;
  return r;
}

}  // namespace weft::detail
