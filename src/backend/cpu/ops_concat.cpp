// concat: a and b (same non-quantized dtype) joined along dim into dst. Element
// bytes are copied as they are; any source strides.
#include <cstring>

#include "kernels.h"
#include "weft/core/error.h"

namespace weft::cpu {

namespace {

// Copies n elements of unit bytes from src (stride src_nb) to dst (stride dst_nb).
void copy_elems(uint8_t* dst, size_t dst_nb, const uint8_t* src, size_t src_nb, int64_t n, size_t unit) {
  if (src_nb == unit && dst_nb == unit) {
    std::memmove(dst, src, static_cast<size_t>(n) * unit);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memmove(dst + i * dst_nb, src + i * src_nb, unit);
}

void concat_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int dim = dst.param_i32(0);
  if (dim < 0 || dim >= kMaxDims) {
    fail(ErrorKind::invalid_input, "concat", "dim " + std::to_string(dim));
  }
  const DTypeTraits& tr = traits(dst.type);
  if (tr.quantized || tr.block_size != 1 || a.type != dst.type || b.type != dst.type) {
    fail(ErrorKind::unsupported, "concat", std::string("dtype ") + std::string(tr.name));
  }
  const size_t unit = tr.unit_bytes;
  const ThreadRows rows(dst, kc);

  rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) {
    const int64_t i[4] = {0, i1, i2, i3};
    uint8_t* out = row_ptr(dst, i[1], i[2], i[3]);
    if (dim == 0) {
      copy_elems(out, dst.nb[0], row_ptr(a, i[1], i[2], i[3]), a.nb[0], a.ne[0], unit);
      copy_elems(out + a.ne[0] * dst.nb[0], dst.nb[0], row_ptr(b, i[1], i[2], i[3]), b.nb[0], b.ne[0], unit);
      return;
    }
    // The whole row comes from a or from b.
    const bool from_a = i[dim] < a.ne[dim];
    const Tensor& s = from_a ? a : b;
    int64_t j[4] = {0, i[1], i[2], i[3]};
    if (!from_a) j[dim] -= a.ne[dim];
    copy_elems(out, dst.nb[0], row_ptr(s, j[1], j[2], j[3]), s.nb[0], dst.ne[0], unit);
  });
}

// Both the same dtype, not quantized (elements are copied as bytes).
bool concat_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  return a && b && a->type == b->type && !traits(a->type).quantized;
}

// Copies straight from the sources.
size_t concat_scratch_bytes(const Tensor&, int) { return 0; }

}  // namespace

const OpFamily kConcatFamily{"concat", concat_supports, concat_scratch_bytes, concat_op};

}  // namespace weft::cpu
