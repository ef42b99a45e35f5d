// Dot-product kernels for the CPU backend, one table per instruction-set
// level, chosen once at run time.
//
//   const DotKernels& k = dot_kernels();          // best level this CPU has
//   float y = k.q4_0(w_blocks, x, n);             // n a multiple of 32
//   k.tile(DType::f16)(w, stride, 4, xs, 4, n, out);  // 4 weight rows x 4 x rows
//
// Weights may be f32, f16, bf16, q8_0 or q4_0; activations are always f32
// (never quantized). Quantized kernels work block by block: each 32-value
// block is unpacked into registers and scaled by its d (exact in f32: a
// 4- or 8-bit integer times an f16), then multiplied with x; nothing larger
// than a register is dequantized. All kernels are thread-safe and allocate
// nothing. Results differ between levels by rounding only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/dtype.h"

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
  float (*q8_0)(const BlockQ8_0* w, const float* x, int64_t n);  // n % 32 == 0
  float (*q4_0)(const BlockQ4_0* w, const float* x, int64_t n);  // n % 32 == 0
  // The same products over register tiles.
  TileDotFn f32_tile;
  TileDotFn f16_tile;
  TileDotFn bf16_tile;
  TileDotFn q8_0_tile;
  TileDotFn q4_0_tile;
  const char* name;  // "avx2", "avx512"

  // The tile kernel for a weight dtype; nullptr for i32.
  TileDotFn tile(DType t) const;
};

enum class Level { avx2, avx512 };

// The widest level this CPU supports, selected on first call (thread-safe).
// WEFT_CPU_SIMD=avx2 in the environment forces the AVX2 table (for tests and
// benchmarks of the baseline on AVX-512 machines).
const DotKernels& dot_kernels();
// The table of one level, or nullptr when this CPU cannot run it.
const DotKernels* dot_kernels_for(Level level);

// w_row . x over n values of a weight row of dtype t (not i32), with the
// dot_kernels() table.
float dot_row(DType t, const void* w_row, const float* x, int64_t n);

// Per-level tables, exported by simd_avx2.cpp and simd_avx512.cpp. Calling
// a level's kernels on a CPU without it is undefined: use dot_kernels_for().
const DotKernels& avx2_dot_table();
const DotKernels& avx512_dot_table();

}  // namespace weft::cpu
