// Eight scale searches at once, one group of values per AVX2 lane: the
// eight groups of a q4_K / q5_K super-block, or half the sixteen of a q6_K
// one, searched side by side. Each lane performs the scalar function's float
// operations (search.h) in the same order, and a lane-wise IEEE operation
// rounds exactly as the scalar one does, so every scale, minimum and level
// is bit-identical to eight calls of the scalar function; the scalar
// branches become per-lane masks. Compiled with -ffp-contract=off, as
// search.cpp (see there).
//
//   float scales[8], neg_mins[8];
//   make_qkx2_quants_x8(32, 15, x, weights, L, scales, neg_mins, -1.f, 0.1f, 20, false);
//   // == make_qkx2_quants(32, 15, x + 32 * g, weights + 32 * g, L + 32 * g,
//   //                     &neg_mins[g], laux, -1.f, 0.1f, 20, false) for g = 0..7
#pragma once

#include <cstdint>

namespace weft::quant {

// The most values a group may hold here.
constexpr int kMaxGroupX8 = 32;

// make_qkx2_quants for the eight groups g = 0..7 of n values (n <=
// kMaxGroupX8) at x + g * n, weighted by weights + g * n: writes the levels
// to L + g * n, -min to neg_min[g] and the scale to scales[g].
void make_qkx2_quants_x8(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* scales,
                         float* neg_min, float rmin, float rdelta, int nstep, bool use_mad);

// make_qx_quants for the eight groups g = 0..7 of n values (n <=
// kMaxGroupX8) at x + g * n: writes L + g * n and scales[g].
void make_qx_quants_x8(int n, int nmax, const float* x, int8_t* L, float* scales);

// The requantizations against a group's stored scale, eight values at a
// time (n a multiple of 8), each value as the scalar loops of q4_K / q5_K
// and q6_K compute it:
//   L[i] = clamp(nearest_int((x[i] + dm) / d), 0, nmax)
void levels_with_min_x8(int n, const float* x, float d, float dm, int nmax, uint8_t* L);
//   L[i] = clamp(nearest_int(x[i] / d), -nmax, nmax - 1) + nmax
void levels_symmetric_x8(int n, const float* x, float d, int nmax, int8_t* L);

}  // namespace weft::quant
