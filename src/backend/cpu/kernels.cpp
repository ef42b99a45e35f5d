// Dispatch from a node to its kernel family, and what the CPU supports.
#include "kernels.h"

#include "scratch_k1.h"
#include "scratch_k2.h"

namespace weft::cpu {
namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_weight(DType t) { return t != DType::i32; }
bool is_f32(const Tensor* t) { return t != nullptr && t->type == DType::f32; }
bool is_i32(const Tensor* t) { return t != nullptr && t->type == DType::i32; }

}  // namespace

bool supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  switch (n.op) {
    case Op::none:
    case Op::view:
    case Op::reshape:
    case Op::permute:
    case Op::transpose:
      return true;
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::swiglu:
      return a && b && is_float(a->type) && is_float(b->type) && n.type == a->type;
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu:
      return a && is_float(a->type) && n.type == a->type;
    case Op::rms_norm:
    case Op::norm:
    case Op::sum_rows:
    case Op::argmax:
    case Op::argsort:
    case Op::top_k:
      return is_f32(a);
    case Op::soft_max:
      return is_f32(a) && (b == nullptr || b->type == DType::f32 || b->type == DType::f16);
    case Op::rope:
      return is_f32(a) && is_i32(b);
    case Op::mul_mat:
      return a && is_weight(a->type) && a->rows_contiguous() && is_f32(b);
    case Op::mul_mat_id:
      return a && is_weight(a->type) && a->rows_contiguous() && is_f32(b) && is_i32(n.src[2]);
    case Op::get_rows:
      return a && a->rows_contiguous() && is_i32(b);
    case Op::set_rows:
      return is_weight(n.type) && n.rows_contiguous() && is_f32(b) && is_i32(n.src[2]);
    case Op::cpy:
      return a && (is_float(a->type) || (a->type == DType::i32 && n.type == DType::i32));
    case Op::cont:
      return a && (!traits(a->type).quantized || a->rows_contiguous());
    case Op::concat:
      return a && b && a->type == b->type && !traits(a->type).quantized;
  }
  return false;
}

size_t scratch_bytes(const Tensor& node, int nth) {
  (void)nth;
  const size_t k1 = k1_scratch_bytes(node);
  const size_t k2 = k2_scratch_bytes(node);
  return k1 > k2 ? k1 : k2;
}

void compute_node(const KernelContext& kc, Tensor& node) {
  switch (node.op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
      return binary_op(kc, node);
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu:
    case Op::swiglu:
      return unary_op(kc, node);
    case Op::rms_norm:
    case Op::norm:
      return norm_op(kc, node);
    case Op::soft_max: return soft_max_op(kc, node);
    case Op::rope: return rope_op(kc, node);
    case Op::sum_rows:
    case Op::argmax:
      return reduce_op(kc, node);
    case Op::argsort:
    case Op::top_k:
      return sort_op(kc, node);
    case Op::concat: return concat_op(kc, node);
    case Op::mul_mat: return mul_mat_op(kc, node);
    case Op::mul_mat_id: return mul_mat_id_op(kc, node);
    case Op::get_rows: return get_rows_op(kc, node);
    case Op::set_rows: return set_rows_op(kc, node);
    case Op::cpy:
    case Op::cont:
      return copy_op(kc, node);
    case Op::none:
    case Op::view:
    case Op::reshape:
    case Op::permute:
    case Op::transpose:
      return;
  }
}

}  // namespace weft::cpu
