// What a remote device computes. GET_DEVICES says only a device's kind, so
// this mirrors the CPU backend's rules (src/backend/cpu/kernels.cpp,
// `cpu::supports`), which is what every worker serves today; keep the two in
// step. The protocol itself can carry every op, dtype, shape and parameter
// weft has (section 4 sends ne, nb, all 16 op_params and every source), so
// nothing is refused for being unsendable one op at a time; the only limits
// are per graph (262144 tensors, 16 MiB encoded), which compute() reports as
// Error(unsupported). Tensor names are not sent.
#include "client/remote.h"

namespace weft::rpc {
namespace {

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}
bool is_weight(DType t) {
  return t != DType::i32;
}
bool is_f32(const Tensor* t) {
  return t != nullptr && t->type == DType::f32;
}
bool is_i32(const Tensor* t) {
  return t != nullptr && t->type == DType::i32;
}

}  // namespace

bool remote_supports_op(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  switch (n.op) {
    case Op::none:
    case Op::view:
    case Op::reshape:
    case Op::permute:
    case Op::transpose: return true;
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::swiglu: return a && b && is_float(a->type) && is_float(b->type) && n.type == a->type;
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu: return a && is_float(a->type) && n.type == a->type;
    case Op::rms_norm:
    case Op::norm:
    case Op::sum_rows:
    case Op::argmax:
    case Op::argsort:
    case Op::top_k: return is_f32(a);
    case Op::soft_max: return is_f32(a) && (b == nullptr || b->type == DType::f32 || b->type == DType::f16);
    case Op::rope: return is_f32(a) && is_i32(b);
    case Op::mul_mat: return a && is_weight(a->type) && a->rows_contiguous() && is_f32(b);
    case Op::mul_mat_id: return a && is_weight(a->type) && a->rows_contiguous() && is_f32(b) && is_i32(n.src[2]);
    case Op::get_rows: return a && a->rows_contiguous() && is_i32(b);
    case Op::set_rows: return is_weight(n.type) && n.rows_contiguous() && is_f32(b) && is_i32(n.src[2]);
    case Op::cpy: return a && (is_float(a->type) || (a->type == DType::i32 && n.type == DType::i32));
    case Op::cont: return a && (!traits(a->type).quantized || a->rows_contiguous());
    case Op::concat: return a && b && a->type == b->type && !traits(a->type).quantized;
  }
  return false;
}

}  // namespace weft::rpc
