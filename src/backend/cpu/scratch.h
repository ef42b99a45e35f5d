// Carving one thread's kernel scratch into pieces (docs/security.md, "Kernel
// scratch"). The backend gives each thread scratch_bytes(node) bytes or more
// (kernels.h); a kernel takes its pieces in the order its family's
// scratch_bytes sized them:
//
//   RowScratch s(kc, dst);             // kc.scratch, or a private fallback
//   float* row = s.take<float>(ne0);   // whole 64-byte lines
//   float* out = s.take<float>(ne0);   // the next ones
//
// Neither carver hands out more than the scratch holds: a piece past the end
// is Error(internal) (a sizing bug), never memory past the allocation. When
// the backend gave no scratch (kc.scratch == nullptr) each allocates
// scratch_bytes(node) for itself, so a kernel stays correct for a caller
// that did not reserve.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels.h"
#include "weft/core/tensor.h"

namespace weft::cpu {

// Throws Error(internal) naming the sizes: a kernel asked for more scratch
// than scratch_bytes() gave it.
[[noreturn]] void scratch_overflow(size_t wanted, size_t left);

// Bytes of a piece of n elements of size unit: rounded up to whole 64-byte
// lines, as both carvers take them. Sizing functions add these up.
inline size_t scratch_piece_bytes(int64_t n, size_t unit) {
  const size_t bytes = static_cast<size_t>(n) * unit;
  return (bytes + 63) & ~static_cast<size_t>(63);
}
// The alignment of AlignedScratch's pieces; a size for it includes this much
// once, for aligning the start.
inline constexpr size_t kScratchAlign = 64;

// Per-row float buffers for the elementwise, norm, softmax, rope and sort
// kernels: pieces packed from the start of the scratch (as aligned as the
// scratch itself, which is enough for float, double and int32 rows), so the
// sizes need no slack.
class RowScratch {
 public:
  RowScratch(const KernelContext& kc, const Tensor& node) : base_(kc.scratch), capacity_(kc.scratch_size) {
    if (base_ == nullptr) {
      capacity_ = scratch_bytes(node, kc.nth);
      fallback_.resize(capacity_ / sizeof(double) + 1);
      base_ = reinterpret_cast<uint8_t*>(fallback_.data());
    }
  }
  RowScratch(const RowScratch&) = delete;
  RowScratch& operator=(const RowScratch&) = delete;

  template <class T>
  T* take(int64_t n) {
    const size_t bytes = scratch_piece_bytes(n, sizeof(T));
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

// Cache-line aligned pieces for the matrix products (strided activation
// rows, 8-bit activation rows, expert grouping) and for the f32 staging rows
// of set_rows and quantizing cpy. Every piece starts on a 64-byte boundary;
// the sizes include kScratchAlign once for aligning the first.
class AlignedScratch {
 public:
  AlignedScratch(const KernelContext& kc, const Tensor& node) {
    uint8_t* base = kc.scratch;
    size_t size = kc.scratch_size;
    if (base == nullptr) {
      size = scratch_bytes(node, kc.nth) + kScratchAlign;
      fallback_.resize(size);
      base = fallback_.data();
    }
    const auto addr = reinterpret_cast<uintptr_t>(base);
    const size_t skip = (kScratchAlign - addr % kScratchAlign) % kScratchAlign;
    next_ = base + (skip < size ? skip : size);
    left_ = skip < size ? size - skip : 0;
  }
  AlignedScratch(const AlignedScratch&) = delete;
  AlignedScratch& operator=(const AlignedScratch&) = delete;

  template <class T>
  T* take(int64_t n) {
    const size_t bytes = scratch_piece_bytes(n, sizeof(T));
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
