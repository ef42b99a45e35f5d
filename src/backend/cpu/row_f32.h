// f32 row staging for kernels that compute in f32 over f32, f16 or bf16
// rows (ops_binary, ops_unary, ops_norm, ops_softmax, ops_rope, ops_sort),
// and the packed row conversions of the copies (ops_copy, ops_rows). The
// buffers come from RowScratch (scratch.h); f16 and bf16 go through the
// vector kernels (vec.h), bit-exact with weft's scalar converters.
//
//   const float* x = load_row_f32(a, pa, n, buf_a);  // pa itself when packed f32
//   float* out = out_row_f32(dst, pd, buf_d);        // pd itself when packed f32
//   ... compute out from x ...
//   store_row_f32(dst, pd, out, n);                  // converts unless out == pd
#pragma once

#include <cstdint>

#include "kernels.h"
#include "weft/core/tensor.h"

namespace weft::cpu {

// t is f32, f16 or bf16; p points at element 0 of a row of n elements spaced
// t.nb[0] bytes apart. Returns p itself when the row is already packed f32,
// else converts into buf (n floats) and returns buf.
const float* load_row_f32(const Tensor& t, const uint8_t* p, int64_t n, float* buf);
// Where to compute a result row: p itself when packed f32, else buf.
inline float* out_row_f32(const Tensor& t, uint8_t* p, float* buf) {
  return t.type == DType::f32 && t.nb[0] == sizeof(float) ? reinterpret_cast<float*>(p) : buf;
}
// Writes v (n floats) to the row at p, converting to t.type; nothing to do
// when v is p (out_row_f32 returned p).
void store_row_f32(const Tensor& t, uint8_t* p, const float* v, int64_t n);

// to_f32 / from_f32 (dtype.h) of n packed elements of any dtype, with the
// vector kernels for f16 and bf16 (f32 is a memmove, as there).
void to_f32_row(DType t, const void* src, float* dst, int64_t n);
void from_f32_row(DType t, const float* src, void* dst, int64_t n);

// The share [begin, end) of thread ith of nth when a contiguous tensor of n
// elements is processed as one flat row (the elementwise fast paths): whole
// blocks of 64 elements, so no two threads write the same cache line of an
// aligned f32 or f16 tensor.
inline Range flat_range(int64_t n, int ith, int nth) {
  constexpr int64_t kBlock = 64;
  const Range blocks = split_range((n + kBlock - 1) / kBlock, ith, nth);
  const int64_t b = blocks.begin * kBlock, e = blocks.end * kBlock;
  return {b < n ? b : n, e < n ? e : n};
}

}  // namespace weft::cpu
