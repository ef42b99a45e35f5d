#include "weft/core/tensor.h"

namespace weft {

const char* op_name(Op op) { return op_is_known(static_cast<int>(op)) ? op_info(op).name : "unknown"; }

size_t Tensor::nbytes() const {
  for (int i = 0; i < kMaxDims; ++i) {
    if (ne[i] == 0) return 0;
  }
  const DTypeTraits& tr = traits(type);
  size_t bytes = static_cast<size_t>(ne[0] / tr.block_size) * nb[0];
  if (tr.block_size == 1) bytes = tr.unit_bytes + static_cast<size_t>(ne[0] - 1) * nb[0];
  for (int i = 1; i < kMaxDims; ++i) bytes += static_cast<size_t>(ne[i] - 1) * nb[i];
  return bytes;
}

bool Tensor::rows_contiguous() const { return nb[0] == traits(type).unit_bytes; }

bool Tensor::is_contiguous() const {
  size_t expected = traits(type).unit_bytes;
  if (nb[0] != expected && ne[0] != 1) return false;
  expected = row_bytes(type, ne[0]);
  for (int i = 1; i < kMaxDims; ++i) {
    if (ne[i] != 1 && nb[i] != expected) return false;
    expected *= static_cast<size_t>(ne[i]);
  }
  return true;
}

void set_packed_strides(Tensor& t) {
  t.nb[0] = traits(t.type).unit_bytes;
  t.nb[1] = row_bytes(t.type, t.ne[0]);
  for (int i = 2; i < kMaxDims; ++i) t.nb[i] = t.nb[i - 1] * static_cast<size_t>(t.ne[i - 1]);
}

bool same_shape(const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (a.ne[i] != b.ne[i]) return false;
  }
  return true;
}

std::string shape_string(const Tensor& t) {
  std::string s(dtype_name(t.type));
  s += "[";
  for (int i = 0; i < kMaxDims; ++i) {
    if (i) s += ",";
    s += std::to_string(t.ne[i]);
  }
  return s + "]";
}

}  // namespace weft
