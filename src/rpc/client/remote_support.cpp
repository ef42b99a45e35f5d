// What a remote device computes. GET_DEVICES says only a device's kind, so
// this mirrors the CPU backend's rules (src/backend/cpu/kernels.cpp,
// `cpu::supports`), which is what every worker serves today; keep the two in
// step. The protocol carries every op, dtype and parameter weft has
// (section 4 sends ne, nb, all 16 op_params and every source); what it does
// not carry, and supports_op() therefore refuses, is a tensor the worker's
// validation rejects although a local device would run it (section 4):
// more than 2^32 elements (zero dims counted as 1), or data or strides not
// aligned to the element (4 bytes for f32/i32, 2 for f16, bf16 and the
// quantized blocks). compute() checks the same before sending, so such a
// graph is Error(unsupported) in the caller instead of a session the worker
// ends. Per-graph limits (262144 tensors, 16 MiB encoded) are
// Error(unsupported) from compute() as well. Tensor names are not sent.
#include <string>

#include "client/remote.h"

namespace weft::rpc {
namespace {

constexpr int64_t kMaxNominalElements = int64_t{1} << 32;

size_t element_alignment(DType type) {
  const DTypeTraits& tr = traits(type);
  return tr.quantized ? alignof(uint16_t) : tr.unit_bytes;
}

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

std::string remote_unsendable(const Tensor& t) {
  int64_t nominal = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.ne[d] > 1 && nominal > kMaxNominalElements / t.ne[d]) return "spans more than 2^32 elements";
    nominal *= t.ne[d] > 1 ? t.ne[d] : 1;
  }
  const size_t align = element_alignment(t.type);
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.ne[d] > 1 && t.nb[d] % align != 0) {
      return "nb[" + std::to_string(d) + "] " + std::to_string(t.nb[d]) + " is not a multiple of " +
             std::to_string(align);
    }
  }
  // Where the data starts: its address once placed (buffers are aligned),
  // else a view's offset into its root.
  const uint64_t start = t.data != nullptr ? reinterpret_cast<uintptr_t>(t.data) : t.view_offs;
  if (start % align != 0) return "data is not aligned to " + std::to_string(align) + " bytes";
  return {};
}

bool remote_supports_op(const Tensor& n) {
  if (!remote_unsendable(n).empty()) return false;
  for (const Tensor* s : n.src) {
    if (s != nullptr && !remote_unsendable(*s).empty()) return false;
  }
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
