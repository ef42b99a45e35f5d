// f32 row staging for kernels that compute in f32 over f32, f16 or bf16
// rows (ops_binary, ops_unary, ops_norm, ops_softmax, ops_sort). The buffers
// come from RowScratch (scratch.h).
//
//   const float* x = load_row_f32(a, pa, n, buf_a);  // pa itself when packed f32
//   float* out = out_row_f32(dst, pd, buf_d);        // pd itself when packed f32
//   ... compute out from x ...
//   store_row_f32(dst, pd, out, n);                  // converts unless out == pd
#pragma once

#include <cstdint>

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

}  // namespace weft::cpu
