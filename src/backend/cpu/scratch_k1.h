// Per-thread scratch for the elementwise, row and sort kernels (ops_binary,
// ops_unary, ops_norm, ops_softmax, ops_rope, ops_sort). The backend's
// scratch_bytes() includes k1_scratch_bytes(node) in what it gives each thread.
//
//   ScratchK1 s(kc, dst);           // kc.scratch, or a private fallback
//   float* row = s.take<float>(n);  // carved in the order k1_scratch_bytes sized
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"
#include "weft/core/tensor.h"

namespace weft::cpu {

// Bytes of scratch one thread needs to run node; 0 when the node's kernel
// needs none or is not one of the families above.
size_t k1_scratch_bytes(const Tensor& node);

// Throws Error(internal) naming the sizes: a kernel asked for more scratch
// than scratch_bytes() gave it.
[[noreturn]] void scratch_overflow(size_t wanted, size_t left);

// n elements of size unit, rounded up to a 64-byte multiple.
inline size_t k1_pad(int64_t n, size_t unit) {
  const size_t bytes = static_cast<size_t>(n) * unit;
  return (bytes + 63) & ~static_cast<size_t>(63);
}

// Hands out consecutive pieces of this thread's scratch. When the backend gave
// none (kc.scratch == nullptr) it allocates k1_scratch_bytes(node) once, so the
// kernels stay correct if a caller forgot to reserve.
// Never hands out more than the scratch holds: a piece past the end is
// Error(internal) (a sizing bug), not a write past the allocation.
class ScratchK1 {
 public:
  ScratchK1(const KernelContext& kc, const Tensor& node) : base_(kc.scratch), capacity_(kc.scratch_size) {
    if (base_ == nullptr) {
      capacity_ = k1_scratch_bytes(node);
      fallback_.resize(capacity_ / sizeof(double) + 1);
      base_ = reinterpret_cast<uint8_t*>(fallback_.data());
    }
  }
  ScratchK1(const ScratchK1&) = delete;
  ScratchK1& operator=(const ScratchK1&) = delete;

  template <class T>
  T* take(int64_t n) {
    const size_t bytes = k1_pad(n, sizeof(T));
    if (n < 0 || bytes > capacity_ - used_) scratch_overflow(bytes, capacity_ - used_);
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += bytes;
    return p;
  }

 private:
  uint8_t* base_;
  size_t capacity_;
  size_t used_ = 0;
  std::vector<double> fallback_;  // double: 8-byte alignment for any take<T>
};

// Row staging for kernels that compute in f32. t is f32, f16 or bf16; p points
// at element 0 of a row of n elements spaced t.nb[0] bytes apart.
// load_row_f32 returns p itself when the row is already packed f32, else
// converts into buf (n floats) and returns buf.
const float* load_row_f32(const Tensor& t, const uint8_t* p, int64_t n, float* buf);
// Where to compute a result row: p itself when packed f32, else buf.
inline float* out_row_f32(const Tensor& t, uint8_t* p, float* buf) {
  return t.type == DType::f32 && t.nb[0] == sizeof(float) ? reinterpret_cast<float*>(p) : buf;
}
// Writes v (n floats) to the row at p, converting to t.type; nothing to do
// when v is p (out_row_f32 returned p).
void store_row_f32(const Tensor& t, uint8_t* p, const float* v, int64_t n);

}  // namespace weft::cpu
