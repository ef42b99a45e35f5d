// Vector kernels over packed f32 rows for the elementwise, norm, softmax and
// rope ops and the f16 / bf16 conversions: one table per instruction-set
// level, chosen once at run time with the same rule as the dot products
// (simd.h: AVX-512 when the CPU has it, unless WEFT_CPU_SIMD=avx2).
//
//   const VecKernels& v = vec_kernels();
//   v.silu(x, out, n);                      // out[i] = silu(x[i]); out may be x
//   double ss = v.sum_sq(x, n);             // sum of x[i]^2, accumulated in double
//   v.f32_to_f16(x, h, n);                  // round to nearest even, as f32_to_f16
//
// Every kernel takes n >= 0 values (any n: a tail shorter than a vector is
// handled), allocates nothing and is thread-safe. "out may be x" means the
// exact same array; any other overlap is not allowed (the planner makes only
// the exact in-place form, docs/security.md).
//
// Accuracy of the transcendental functions over every f32 input (the unit
// test sweeps them against float64, tests/cpu/test_vec_math.cpp): about 1
// ulp of the exact result (exp, the sigmoids; gelu 1.1) or half an ulp
// (tanh, softcap, gelu_erf: computed in double), tiny (subnormal) results
// and large |x| included; no NaN or infinity where the exact result is
// finite; NaN in gives NaN out. The conversions are bit-exact with weft's
// scalar ones (dtype.h), NaN payloads included, at every level. Levels
// differ by rounding only.
#pragma once

#include <cstdint>

#include "simd.h"

namespace weft::cpu {

using UnaryRowFn = void (*)(const float* x, float* out, int64_t n);
using BinaryRowFn = void (*)(const float* x, const float* y, float* out, int64_t n);

enum class BinaryOp { add, sub, mul, div };

struct VecKernels {
  // out[i] = f(x[i]). exp and tanh serve soft_max and softcap inside the
  // table; they are here for the tests.
  UnaryRowFn exp;
  UnaryRowFn tanh;
  UnaryRowFn sigmoid;
  UnaryRowFn silu;      // x sigmoid(x)
  UnaryRowFn gelu;      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as x sigmoid(2 sqrt(2/pi) (...))
  UnaryRowFn gelu_erf;  // 0.5 x erfc(-x / sqrt 2)
  UnaryRowFn sqr;
  UnaryRowFn sqrt;
  // out[i] = cap tanh(x[i] / cap); cap finite and > 0.
  void (*softcap)(const float* x, float cap, float* out, int64_t n);
  // out[i] = x[i] * s.
  void (*scale)(const float* x, float s, float* out, int64_t n);
  // out[i] = silu(x[i]) * y[i]; out may be x or y.
  BinaryRowFn swiglu;

  // out[i] = x[i] op y[i], indexed by BinaryOp; out may be x.
  BinaryRowFn binary[4];
  // out[i] = x[i] op y; out may be x.
  void (*binary_scalar[4])(const float* x, float y, float* out, int64_t n);

  // Row reductions, accumulated in double.
  double (*sum)(const float* x, int64_t n);
  double (*sum_sq)(const float* x, int64_t n);
  // sum (x[i] - mean)^2, with the difference taken to about double accuracy.
  double (*sum_sq_dev)(const float* x, double mean, int64_t n);
  // out[i] = (x[i] - mean) * s (the difference as in sum_sq_dev); out may be x.
  void (*center_scale)(const float* x, double mean, float s, float* out, int64_t n);

  // soft_max pieces. scale_add: out[i] = x[i] * s + m[i] (m may be nullptr:
  // no mask); returns the largest out[i], ignoring NaN (-inf when n == 0 or
  // all are -inf or NaN). exp_sum: out[i] = exp(x[i] - sub), returns their
  // sum in double. out may be x in both.
  float (*scale_add_max)(const float* x, float s, const float* m, float* out, int64_t n);
  double (*exp_sum)(const float* x, float sub, float* out, int64_t n);

  // rope rotations. Interleaved pairs (x[2i], x[2i+1]) rotated by (c[2i],
  // s[2i]): c and s hold each pair's cosine and sine twice, n even.
  //   out[2i] = x[2i] c[2i] - x[2i+1] s[2i],  out[2i+1] = x[2i] s[2i] + x[2i+1] c[2i]
  void (*rope_pairs)(const float* x, const float* c, const float* s, float* out, int64_t n);
  // Split halves: (x0[i], x1[i]) rotated by (c[i], s[i]), n pairs.
  void (*rope_halves)(const float* x0, const float* x1, const float* c, const float* s, float* out0, float* out1,
                      int64_t n);

  // Conversions (round to nearest even; NaN as the scalar converters).
  void (*f16_to_f32)(const uint16_t* h, float* out, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* out, int64_t n);
  void (*bf16_to_f32)(const uint16_t* h, float* out, int64_t n);
  void (*f32_to_bf16)(const float* x, uint16_t* out, int64_t n);

  const char* name;  // "avx2", "avx512"
};

// The table at the level dot_kernels() uses (WEFT_CPU_SIMD included).
const VecKernels& vec_kernels();
// The table of one level, or nullptr when this CPU cannot run it.
const VecKernels* vec_kernels_for(Level level);

// Per-level tables (vec_avx2.cpp, vec_avx512.cpp). Calling a level's kernels
// on a CPU without it is undefined: use vec_kernels_for().
const VecKernels& avx2_vec_table();
const VecKernels& avx512_vec_table();

}  // namespace weft::cpu
