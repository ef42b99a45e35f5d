// CPU kernels, one entry point per op family. Internal to the CPU backend.
//
// Threading contract: compute_node() is called by every thread of the pool
// with the same node; thread ith of nth does its share (usually a range of
// output rows) and returns. The pool puts a barrier between nodes, so a
// kernel may read anything earlier nodes wrote. Kernels must be correct for
// any strides the op constructors accept (non-contiguous views included) and
// for any nth >= 1, including more threads than rows.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "weft/core/tensor.h"

namespace weft::cpu {

struct KernelContext {
  int ith = 0;  // this thread, 0 <= ith < nth
  int nth = 1;
  uint8_t* scratch = nullptr;  // this thread's scratch
  size_t scratch_size = 0;     // its bytes: at least scratch_bytes(node) for every node run
  // Set when the compute is being cancelled: long kernels (the matrix
  // products) may stop early; what they leave in dst is then unspecified.
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled() const { return cancel != nullptr && cancel->load(std::memory_order_relaxed); }
};

// Half-open range [begin, end) of n items that thread ith of nth handles.
struct Range {
  int64_t begin;
  int64_t end;
};
inline Range split_range(int64_t n, int ith, int nth) {
  const int64_t per = (n + nth - 1) / nth;
  const int64_t b = per * ith < n ? per * ith : n;
  const int64_t e = b + per < n ? b + per : n;
  return {b, e};
}

// Address of element (i0, i1, i2, i3) for non-quantized tensors.
inline uint8_t* elem_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
// Address of row (i1, i2, i3).
inline uint8_t* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Whether the CPU kernels handle this node (op, dtypes). Views and Op::none
// are always supported (nothing to compute).
bool supports(const Tensor& node);
// Per-thread scratch bytes the node's kernel needs. Sized from the operands
// the kernel actually reads (docs/security.md, "Kernel scratch"): a kernel
// takes pieces of it through ScratchK1/ScratchK2, which refuse (Error
// internal) to hand out more than scratch_size, so a sizing mistake is an
// error, never a write past the end.
size_t scratch_bytes(const Tensor& node, int nth);
// Runs this thread's share of node. Views and Op::none do nothing.
void compute_node(const KernelContext& kc, Tensor& node);

// Op families (ops_*.cpp).
void binary_op(const KernelContext& kc, Tensor& dst);   // add sub mul div
void unary_op(const KernelContext& kc, Tensor& dst);    // scale sqr sqrt silu gelu swiglu
void norm_op(const KernelContext& kc, Tensor& dst);     // rms_norm norm
void soft_max_op(const KernelContext& kc, Tensor& dst);
void rope_op(const KernelContext& kc, Tensor& dst);
void reduce_op(const KernelContext& kc, Tensor& dst);   // sum_rows argmax
void sort_op(const KernelContext& kc, Tensor& dst);     // argsort top_k
void concat_op(const KernelContext& kc, Tensor& dst);
void mul_mat_op(const KernelContext& kc, Tensor& dst);
void mul_mat_id_op(const KernelContext& kc, Tensor& dst);
void get_rows_op(const KernelContext& kc, Tensor& dst);
void set_rows_op(const KernelContext& kc, Tensor& dst);
void copy_op(const KernelContext& kc, Tensor& dst);     // cpy cont

}  // namespace weft::cpu
