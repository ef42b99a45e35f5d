// CPU kernels: the op families and the backend's entry points into them.
// Internal to the CPU backend.
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

// The rows of a tensor this thread computes: its split_range share of
// t.nrows(), each row as (i1, i2, i3), in row order (row ir is
// (i3 * ne2 + i2) * ne1 + i1). The one row loop of the row kernels:
//
//   const ThreadRows rows(dst, kc);
//   if (rows.empty()) return;        // before taking scratch
//   rows.for_each([&](int64_t i1, int64_t i2, int64_t i3) { ... row_ptr(dst, i1, i2, i3) ... });
//
// The indices are stepped, not divided out per row.
class ThreadRows {
 public:
  ThreadRows(const Tensor& t, const KernelContext& kc)
      : r_(split_range(t.nrows(), kc.ith, kc.nth)), ne1_(t.ne[1]), ne2_(t.ne[2]) {}
  bool empty() const { return r_.begin >= r_.end; }
  template <class RowFn>
  void for_each(RowFn&& f) const {
    if (empty()) return;
    int64_t i1 = r_.begin % ne1_, i2 = (r_.begin / ne1_) % ne2_, i3 = r_.begin / (ne1_ * ne2_);
    for (int64_t ir = r_.begin; ir < r_.end; ++ir) {
      f(i1, i2, i3);
      if (++i1 == ne1_) {
        i1 = 0;
        if (++i2 == ne2_) {
          i2 = 0;
          ++i3;
        }
      }
    }
  }

 private:
  Range r_;
  int64_t ne1_, ne2_;
};

// Address of element (i0, i1, i2, i3) for non-quantized tensors.
inline uint8_t* elem_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
// Address of row (i1, i2, i3).
inline uint8_t* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// An op family: the ops one kernel runs, declared once next to that kernel
// (ops_*.cpp) with the rule for which nodes it handles and the scratch it
// needs, so the three cannot drift apart. kernels.cpp maps every Op to
// exactly one family (a missing Op does not compile); the entry points below
// look the family up once per node.
struct OpFamily {
  const char* name;  // for errors and tests: "binary", "mul_mat", ...
  // Whether the kernel handles this node's dtypes and layout. Shapes were
  // already checked by the op constructor; a node refused here is reported
  // as Error(unsupported) before anything runs.
  bool (*supports)(const Tensor& node);
  // Per-thread scratch bytes, sized from the operands the kernel reads.
  // Asked only for nodes supports() accepted.
  size_t (*scratch_bytes)(const Tensor& node, int nth);
  // This thread's share of the node (the threading contract above).
  void (*compute)(const KernelContext& kc, Tensor& node);
};

// The family that runs op. Every Op has one; views and Op::none belong to
// the family that computes nothing. Throws Error(internal) for a value
// outside the enum.
const OpFamily& op_family(Op op);

// The backend's entry points, each through op_family(node.op).
//
// Whether the CPU kernels handle this node (op, dtypes). Views and Op::none
// are always supported (nothing to compute); a value outside Op is not.
bool supports(const Tensor& node);
// Per-thread scratch bytes the node's kernel needs (docs/security.md,
// "Kernel scratch"). A kernel takes pieces of it through RowScratch or
// AlignedScratch (scratch.h), which refuse (Error internal) to hand out more
// than scratch_size, so a sizing mistake is an error, never a write past the
// end. Only for nodes supports() accepted.
size_t scratch_bytes(const Tensor& node, int nth);
// Runs this thread's share of node. Views and Op::none do nothing.
void compute_node(const KernelContext& kc, Tensor& node);

// rms_norm followed by the mul by a weight row, as one kernel (ops_norm.cpp):
// whether mul (f32, packed rows) multiplies norm (rms_norm of an f32 tensor)
// by one f32 row of norm's width, broadcast over the rest; and the fused
// kernel, which writes mul's result, bit-identical to the two nodes run one
// after the other (x * s rounded, then times w), and never writes norm. Its
// scratch is norm's. Only the backend knows whether anything else reads
// norm (cpu_device.cpp).
bool fusable_rms_norm_mul(const Tensor& norm, const Tensor& mul);
void rms_norm_mul(const KernelContext& kc, Tensor& mul, const Tensor& norm);

// The families (ops_*.cpp).
extern const OpFamily kNoComputeFamily;  // none, view reshape permute transpose (kernels.cpp)
extern const OpFamily kBinaryFamily;     // add sub mul div
extern const OpFamily kUnaryFamily;      // scale sqr sqrt silu gelu gelu_erf sigmoid softcap
extern const OpFamily kSwigluFamily;     // swiglu (ops_unary.cpp)
extern const OpFamily kSwigluOaiFamily;  // swiglu_oai (ops_unary.cpp)
extern const OpFamily kNormFamily;       // rms_norm norm
extern const OpFamily kSoftMaxFamily;    // soft_max
extern const OpFamily kRopeFamily;       // rope rope_ext
extern const OpFamily kReduceFamily;     // sum_rows argmax
extern const OpFamily kSortFamily;       // argsort top_k
extern const OpFamily kConcatFamily;     // concat
extern const OpFamily kMulMatFamily;     // mul_mat
extern const OpFamily kMulMatIdFamily;   // mul_mat_id (ops_matmul.cpp)
extern const OpFamily kGetRowsFamily;    // get_rows
extern const OpFamily kSetRowsFamily;    // set_rows
extern const OpFamily kRoutedRowsFamily; // routed_rows (ops_rows.cpp)
extern const OpFamily kCpyFamily;        // cpy
extern const OpFamily kContFamily;       // cont (ops_copy.cpp)
extern const OpFamily kAttentionFamily;  // flash_attn

// Dtype tests shared by the support rules.
inline bool is_float_type(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
inline bool is_weight_type(DType t) { return t != DType::i32; }  // f32, f16, bf16 or quantized
inline bool is_f32(const Tensor* t) { return t != nullptr && t->type == DType::f32; }
inline bool is_i32(const Tensor* t) { return t != nullptr && t->type == DType::i32; }

}  // namespace weft::cpu
