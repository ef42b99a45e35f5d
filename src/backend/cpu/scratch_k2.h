// Per-thread scratch for the matrix-product, row and copy kernels
// (ops_matmul, ops_rows, ops_copy). The backend's scratch_bytes() includes
// k2_scratch_bytes(node) in what it gives each thread.
//
//   ScratchK2 s(kc, node);              // kc.scratch, or a private fallback
//   float* x = s.take<float>(4 * K);    // in the order the sizing assumed
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"
#include "weft/core/tensor.h"

namespace weft::cpu {

// Bytes of scratch one thread needs to run node; 0 when its kernel needs none
// or is not one of the families above.
size_t k2_scratch_bytes(const Tensor& node);

// The per-family parts of k2_scratch_bytes (each 0 for other ops).
size_t matmul_scratch_bytes(const Tensor& node);  // mul_mat, mul_mat_id
size_t rows_scratch_bytes(const Tensor& node);    // get_rows, set_rows
size_t copy_scratch_bytes(const Tensor& node);    // cpy, cont

[[noreturn]] void scratch_overflow(size_t wanted, size_t left);  // scratch_k1.h

// n elements of size unit rounded up to whole 64-byte lines; sizes built from
// these plus kScratchAlign cover any layout ScratchK2 hands out.
inline size_t k2_pad(int64_t n, size_t unit) {
  const size_t bytes = static_cast<size_t>(n) * unit;
  return (bytes + 63) & ~static_cast<size_t>(63);
}
inline constexpr size_t kScratchAlign = 64;

// Hands out consecutive 64-byte aligned pieces of this thread's scratch.
// Without one (kc.scratch == nullptr) it allocates k2_scratch_bytes(node).
class ScratchK2 {
 public:
  ScratchK2(const KernelContext& kc, const Tensor& node) {
    uint8_t* base = kc.scratch;
    size_t size = kc.scratch_size;
    if (base == nullptr) {
      size = k2_scratch_bytes(node) + kScratchAlign;
      fallback_.resize(size);
      base = fallback_.data();
    }
    const auto addr = reinterpret_cast<uintptr_t>(base);
    const size_t skip = (kScratchAlign - addr % kScratchAlign) % kScratchAlign;
    next_ = base + (skip < size ? skip : size);
    left_ = skip < size ? size - skip : 0;
  }
  ScratchK2(const ScratchK2&) = delete;
  ScratchK2& operator=(const ScratchK2&) = delete;

  // A piece past the end is Error(internal) (a sizing bug), never handed out.
  template <class T>
  T* take(int64_t n) {
    const size_t bytes = k2_pad(n, sizeof(T));
    if (n < 0 || bytes > left_) scratch_overflow(bytes, left_);
    T* p = reinterpret_cast<T*>(next_);
    next_ += bytes;
    left_ -= bytes;
    return p;
  }

 private:
  uint8_t* next_ = nullptr;
  size_t left_ = 0;
  std::vector<uint8_t> fallback_;
};

}  // namespace weft::cpu
