// Dot-product kernels of the float weight types (f32, f16, bf16) for the CPU
// backend, one table per instruction-set level, chosen once at run time.
// Quantized weights have their own kernels with 8-bit activations (qdot.h).
//
//   const DotKernels& k = dot_kernels();          // best level this CPU has
//   float y = k.f16(w_row, x, n);
//   k.tile(DType::f16)(w, stride, 4, xs, 4, n, out);  // 4 weight rows x 4 x rows
//
// Activations are f32. All kernels are thread-safe and allocate nothing.
// Results differ between levels by rounding only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/core/dtype.h"

namespace weft::cpu {

// A register tile: nw weight rows (1 <= nw <= kTileRows; row i starts at
// w + i * w_stride bytes; n values each, a multiple of 32 when quantized)
// against nx activation rows (1 <= nx <= kTileCols):
//   out[i * kTileCols + j] = w_i . x[j].
// Each weight block is unpacked once for all nx activation rows, and each
// activation vector loaded once for all nw weight rows.
using TileDotFn = void (*)(const void* w, size_t w_stride, int nw, const float* const* x, int nx, int64_t n,
                           float* out);
inline constexpr int kTileRows = 4;
inline constexpr int kTileCols = 4;

struct DotKernels {
  float (*f32)(const float* w, const float* x, int64_t n);
  float (*f16)(const uint16_t* w, const float* x, int64_t n);
  float (*bf16)(const uint16_t* w, const float* x, int64_t n);
  // The same products over register tiles.
  TileDotFn f32_tile;
  TileDotFn f16_tile;
  TileDotFn bf16_tile;
  const char* name;  // "avx2", "avx512"

  // The tile kernel for a float weight dtype; nullptr for the others.
  TileDotFn tile(DType t) const;
};

enum class Level { avx2, avx512 };

// The widest level this CPU supports, selected on first call (thread-safe).
// WEFT_CPU_SIMD=avx2 in the environment forces the AVX2 table (for tests and
// benchmarks of the baseline on AVX-512 machines).
const DotKernels& dot_kernels();
// The table of one level, or nullptr when this CPU cannot run it.
const DotKernels* dot_kernels_for(Level level);

// w_row . x over n values of a weight row of dtype t (f32, f16 or bf16),
// with the dot_kernels() table; 0 for any other type.
float dot_row(DType t, const void* w_row, const float* x, int64_t n);

// Per-level tables, exported by simd_avx2.cpp and simd_avx512.cpp. Calling
// a level's kernels on a CPU without it is undefined: use dot_kernels_for().
const DotKernels& avx2_dot_table();
const DotKernels& avx512_dot_table();

}  // namespace weft::cpu
