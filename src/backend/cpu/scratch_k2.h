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
#include "weft/tensor.h"

namespace weft::cpu {

// Bytes of scratch one thread needs to run node; 0 when its kernel needs none
// or is not one of the families above.
size_t k2_scratch_bytes(const Tensor& node);

// The per-family parts of k2_scratch_bytes (each 0 for other ops).
size_t matmul_scratch_bytes(const Tensor& node);  // mul_mat, mul_mat_id
size_t rows_scratch_bytes(const Tensor& node);    // get_rows, set_rows
size_t copy_scratch_bytes(const Tensor& node);    // cpy, cont

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
    if (base == nullptr) {
      fallback_.resize(k2_scratch_bytes(node) + kScratchAlign);
      base = fallback_.data();
    }
    const auto addr = reinterpret_cast<uintptr_t>(base);
    next_ = base + ((kScratchAlign - addr % kScratchAlign) % kScratchAlign);
  }
  ScratchK2(const ScratchK2&) = delete;
  ScratchK2& operator=(const ScratchK2&) = delete;

  template <class T>
  T* take(int64_t n) {
    T* p = reinterpret_cast<T*>(next_);
    next_ += k2_pad(n, sizeof(T));
    return p;
  }

 private:
  uint8_t* next_ = nullptr;
  std::vector<uint8_t> fallback_;
};

}  // namespace weft::cpu
