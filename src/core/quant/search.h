// The scale searches shared by ggml's reference quantizers (ggml-quants.c),
// followed operation by operation: each returns exactly the scale and levels
// ggml's function returns, which is what makes the written bytes identical.
// Only the paths without an importance matrix are implemented.
#pragma once

#include <cstdint>

namespace weft::quant {

// Rounds to nearest, ties to even, by ggml's float trick (adding 1.5 * 2^23).
// Valid for |x| <= 4194303; outside that the result is meaningless (not UB).
int nearest_int(float x);

// Symmetric levels in [-nmax, nmax) for n values weighted by x^2, trying 19
// scales around -nmax / max (ggml make_qx_quants, rmse_type 1, no weights).
// Writes L[i] = level + nmax; returns the scale (0 for an all-zero group).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L);

// As make_qx_quants, then up to five rounds of improving single levels
// (ggml make_q3_quants with do_rmse). Writes L[i] = level + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric levels in [0, nmax] with a minimum, weighted by `weights`:
// tries nstep + 1 scales from (nmax + rmin) to (nmax + rmin + nstep * rdelta)
// over the range and keeps the best least-squares fit (ggml make_qkx2_quants).
// Writes L; stores -min (>= 0) in *neg_min; returns the scale. laux is
// scratch space for n levels.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, uint8_t* laux,
                       float rmin, float rdelta, int nstep, bool use_mad);

// The index of the entry of the ascending table values[0, n) nearest to x;
// a tie takes the upper entry (ggml best_index_int8).
int best_index_int8(int n, const int8_t* values, float x);

// Scale and minimum j (0..7) of the 12 packed bytes of a q4_K / q5_K block.
void get_scale_min_k4(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min);

// Packs 6-bit scale ls and minimum lm of group j (0..7) into q4_K / q5_K's
// 12 bytes; groups must be packed in order 0..7 into zeroed bytes.
void set_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* packed);

}  // namespace weft::quant
