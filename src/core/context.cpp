#include "weft/core/context.h"

#include <string>

#include "weft/core/error.h"

namespace weft {

namespace {
// Caps a tensor at 2^52 bytes: far beyond any machine, small enough that
// offset arithmetic on it can never overflow 64 bits.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 52;
}  // namespace

Tensor* Context::new_tensor(DType type, std::span<const int64_t> ne) {
  if (ne.empty() || ne.size() > kMaxDims) {
    fail(ErrorKind::invalid_input, "new_tensor", std::to_string(ne.size()) + " dims (1 to 4 allowed)");
  }
  Tensor t;
  t.type = type;
  int64_t elements = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 0 || ne[i] > kMaxTensorBytes) {
      fail(ErrorKind::invalid_input, "new_tensor", "dim " + std::to_string(i) + " is " + std::to_string(ne[i]));
    }
    t.ne[i] = ne[i];
    if (ne[i] != 0 && elements > kMaxTensorBytes / ne[i]) {
      fail(ErrorKind::invalid_input, "new_tensor", "too many elements in " + shape_string(t));
    }
    elements *= ne[i];
  }
  const DTypeTraits& tr = traits(type);
  if (t.ne[0] % tr.block_size != 0) {
    fail(ErrorKind::invalid_input, "new_tensor",
         shape_string(t) + ": row length is not a multiple of the " + std::to_string(tr.block_size) + "-element block");
  }
  if (elements / tr.block_size > kMaxTensorBytes / static_cast<int64_t>(tr.unit_bytes)) {
    fail(ErrorKind::invalid_input, "new_tensor", shape_string(t) + " is too large");
  }
  set_packed_strides(t);
  tensors_.push_back(std::move(t));
  return &tensors_.back();
}

Tensor* Context::new_node() {
  tensors_.emplace_back();
  return &tensors_.back();
}

}  // namespace weft
