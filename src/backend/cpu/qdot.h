// Matrix products over quantized weights with 8-bit activations, as the
// standard engines compute them (docs/quantization.md, "Dot products").
//
// Each activation row is quantized once per product into its weight type's
// partner format: q8_0 blocks (32 values, f16 scale) for the 32-value types,
// q8_K blocks (256 values, f32 scale, sums of each 16 quants) for the
// K-quants and iq4_xs. The tile kernels then take integer dot products block
// by block and scale once per block (or sub-block):
//
//   const QuantDot* qd = quant_dot(DType::q4_K);      // nullptr: not quantized
//   std::vector<uint8_t> xq(act_row_bytes(qd->act, n));
//   quantize_act_row(qd->act, x, xq.data(), n);        // n % 256 == 0 here
//   const void* xs[1] = {xq.data()};
//   float y[kTileRows * kTileCols];
//   qd->tile(w, w_stride, 1, xs, 1, n, y);             // y[0] = w . x
//
// Same tile contract as TileDotFn (simd.h): nw <= kTileRows weight rows,
// nx <= kTileCols activation rows, out[i * kTileCols + j] = w_i . x_j. All
// kernels are thread-safe and allocate nothing. Results differ between
// instruction-set levels by float rounding only (the integer sums are exact).
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd.h"
#include "weft/core/dtype.h"

namespace weft::cpu {

enum class ActType : uint8_t { q8_0, q8_K };

// ggml's block_q8_K: the K-quants' activation block.
struct BlockQ8K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];  // sums of each 16 consecutive qs
};
static_assert(sizeof(BlockQ8K) == 292);

using QuantTileFn = void (*)(const void* w, size_t w_stride, int nw, const void* const* xq, int nx, int64_t n,
                             float* out);

struct QuantDot {
  ActType act;
  QuantTileFn tile;
};

// The kernel for weight type t at the level dot_kernels() chose (the
// WEFT_CPU_SIMD override included); nullptr when t is not quantized.
const QuantDot* quant_dot(DType t);
// The same at one level (nullptr also when this CPU cannot run the level).
const QuantDot* quant_dot_for(Level level, DType t);

// Bytes of n activations in format a (n a multiple of its block).
size_t act_row_bytes(ActType a, int64_t n);
// Quantizes n floats into act_row_bytes(a, n) bytes at xq. q8_0: d = amax /
// 127, q = round(x / d); q8_K: d = max / -127 (max the value of largest
// magnitude), q = round(x / d), bsums filled. Non-finite inputs give
// unspecified (but defined) quants, never undefined behaviour.
void quantize_act_row(ActType a, const float* x, void* xq, int64_t n);

// Per-level tables, indexed by DType; entries for non-quantized types are
// empty (tile == nullptr). Exported by qdot.cpp (generic), qdot_avx2.cpp and
// qdot_avx512.cpp.
struct QuantDotTable {
  QuantDot by_type[kDTypeCount];
  void (*quantize_q8_0)(const float* x, void* xq, int64_t n);
  void (*quantize_q8_K)(const float* x, void* xq, int64_t n);
};
const QuantDotTable& generic_quant_table();
const QuantDotTable& avx2_quant_table();
const QuantDotTable& avx512_quant_table();
// The AVX2 super-block types' entries (qdot_avx2_k.cpp), which
// avx2_quant_table() includes.
const QuantDotTable& avx2_super_block_table();

// The AVX2 activation quantizers of the AVX2 table (qdot_act_avx2.cpp).
void quantize_q8_0_avx2(const float* x, void* xq, int64_t n);
void quantize_q8_K_avx2(const float* x, void* xq, int64_t n);

}  // namespace weft::cpu
