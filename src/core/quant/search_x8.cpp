// The eight-lane scale searches (search_x8.h). Every line mirrors a line of
// search.cpp: same operands, same order, float lanes, no fused multiply-add
// (this file is compiled with -ffp-contract=off). Comparisons use the
// ordered predicates where the scalar code has <, >, == (false on NaN) and
// the unordered not-equal where it tests a float for truth (NaN is true).
#include "search_x8.h"

#include <immintrin.h>

namespace weft::quant {
namespace {

using F = __m256;
using I = __m256i;

F add(F a, F b) { return _mm256_add_ps(a, b); }
F sub(F a, F b) { return _mm256_sub_ps(a, b); }
F mul(F a, F b) { return _mm256_mul_ps(a, b); }
F div(F a, F b) { return _mm256_div_ps(a, b); }
F splat(float v) { return _mm256_set1_ps(v); }
F to_float(I v) { return _mm256_cvtepi32_ps(v); }  // exact: levels are small
// Where mask is set, b; elsewhere a.
F pick(F a, F b, F mask) { return _mm256_blendv_ps(a, b, mask); }
I pick(I a, I b, F mask) { return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), mask)); }
F gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
F lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
F eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
F is_true(F a) { return _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NEQ_UQ); }
F abs(F a) { return _mm256_andnot_ps(splat(-0.0f), a); }
bool none(F mask) { return _mm256_movemask_ps(mask) == 0; }

// nearest_int lane by lane: the same float addition and bit arithmetic.
I nearest(F x) {
  const I bits = _mm256_castps_si256(add(x, splat(12582912.f)));
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

I clamp(I l, int lo, int hi) {
  return _mm256_max_epi32(_mm256_set1_epi32(lo), _mm256_min_epi32(_mm256_set1_epi32(hi), l));
}

// out[i] lane g = p[g * n + i]: the eight groups transposed, one vector a
// position.
void transpose_groups(int n, const float* p, F* out) {
  const I index = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(n));
  for (int i = 0; i < n; ++i) out[i] = _mm256_i32gather_ps(p + i, index, 4);
}

// L[g * n + i] = lane g of levels[i] + bias.
template <typename T>
void store_levels(int n, const I* levels, int bias, T* L) {
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < n; ++i) {
    _mm256_store_si256(reinterpret_cast<I*>(lanes), levels[i]);
    for (int g = 0; g < 8; ++g) L[g * n + i] = static_cast<T>(lanes[g] + bias);
  }
}

// The state of eight make_qkx2_quants searches.
struct Qkx2Lanes {
  int n, nmax;
  bool use_mad;
  F x[kMaxGroupX8], w[kMaxGroupX8];
  F min, max, sum_w, sum_x;
  F flat;  // max == min: the scalar function returns at once
  F scale, best_error;
  I L[kMaxGroupX8];

  F error_of(F diff) const { return use_mad ? abs(diff) : mul(diff, diff); }

  void init_range() {
    min = x[0];
    max = x[0];
    sum_w = w[0];
    sum_x = mul(sum_w, x[0]);
    for (int i = 1; i < n; ++i) {
      min = _mm256_min_ps(x[i], min);  // x[i] < min ? x[i] : min
      max = _mm256_max_ps(x[i], max);  // x[i] > max ? x[i] : max
      sum_w = add(sum_w, w[i]);
      sum_x = add(sum_x, mul(w[i], x[i]));
    }
    const F zero = _mm256_setzero_ps();
    min = pick(min, zero, gt(min, zero));
    flat = eq(max, min);
  }

  void first_levels() {
    const F iscale = div(splat(static_cast<float>(nmax)), sub(max, min));
    scale = div(splat(1.f), iscale);
    best_error = _mm256_setzero_ps();
    for (int i = 0; i < n; ++i) {
      L[i] = clamp(nearest(mul(iscale, sub(x[i], min))), 0, nmax);
      const F diff = sub(add(mul(scale, to_float(L[i])), min), x[i]);
      best_error = add(best_error, mul(w[i], error_of(diff)));
    }
  }

  // Step is of the search: the least-squares fit of the levels at that
  // scale, kept in the lanes where it has a smaller error (never in flat ones).
  void try_step(float rmin, float rdelta, int is) {
    const F iscale = div(splat(rmin + rdelta * is + nmax), sub(max, min));
    F sum_l = _mm256_setzero_ps(), sum_l2 = sum_l, sum_xl = sum_l;
    I laux[kMaxGroupX8];
    for (int i = 0; i < n; ++i) {
      laux[i] = clamp(nearest(mul(iscale, sub(x[i], min))), 0, nmax);
      const F l = to_float(laux[i]);
      const F wl = mul(w[i], l);
      sum_l = add(sum_l, wl);
      sum_l2 = add(sum_l2, mul(wl, l));
      sum_xl = add(sum_xl, mul(wl, x[i]));
    }
    const F D = sub(mul(sum_w, sum_l2), mul(sum_l, sum_l));
    const F valid = _mm256_andnot_ps(flat, gt(D, _mm256_setzero_ps()));
    if (none(valid)) return;
    F this_scale = div(sub(mul(sum_w, sum_xl), mul(sum_x, sum_l)), D);
    F this_min = div(sub(mul(sum_l2, sum_x), mul(sum_l, sum_xl)), D);
    const F positive = gt(this_min, _mm256_setzero_ps());
    this_min = pick(this_min, _mm256_setzero_ps(), positive);
    this_scale = pick(this_scale, div(sum_xl, sum_l2), positive);
    F cur_error = _mm256_setzero_ps();
    for (int i = 0; i < n; ++i) {
      const F diff = sub(add(mul(this_scale, to_float(laux[i])), this_min), x[i]);
      cur_error = add(cur_error, mul(w[i], error_of(diff)));
    }
    const F better = _mm256_and_ps(valid, lt(cur_error, best_error));
    if (none(better)) return;
    for (int i = 0; i < n; ++i) L[i] = pick(L[i], laux[i], better);
    best_error = pick(best_error, cur_error, better);
    scale = pick(scale, this_scale, better);
    min = pick(min, this_min, better);
  }
};

// The state of eight make_qx_quants searches.
struct QxLanes {
  int n, nmax;
  F x[kMaxGroupX8];
  F max;  // signed_absmax; 0 in the lanes the scalar function returns from at once
  F scale, best;
  I L[kMaxGroupX8];

  void init_max() {
    F amax = _mm256_setzero_ps();
    max = amax;
    for (int i = 0; i < n; ++i) {
      const F ax = abs(x[i]);
      const F larger = gt(ax, amax);
      amax = pick(amax, ax, larger);
      max = pick(max, x[i], larger);
    }
    max = pick(max, _mm256_setzero_ps(), lt(amax, splat(1e-15f)));  // ggml GROUP_MAX_EPS
  }

  // The levels at iscale into levels; their weighted sums into sumlx, suml2.
  void levels_at(F iscale, I* levels, F& sumlx, F& suml2) const {
    sumlx = _mm256_setzero_ps();
    suml2 = sumlx;
    for (int i = 0; i < n; ++i) {
      levels[i] = clamp(nearest(mul(iscale, x[i])), -nmax, nmax - 1);
      const F l = to_float(levels[i]);
      const F w = mul(x[i], x[i]);
      sumlx = add(sumlx, mul(mul(w, x[i]), l));
      suml2 = add(suml2, mul(mul(w, l), l));
    }
  }

  void search() {
    F sumlx, suml2;
    levels_at(div(splat(static_cast<float>(-nmax)), max), L, sumlx, suml2);
    scale = pick(_mm256_setzero_ps(), div(sumlx, suml2), is_true(suml2));
    best = mul(scale, sumlx);
    const F live = _mm256_cmp_ps(max, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    for (int is = -9; is <= 9; ++is) {
      if (is == 0) continue;
      I laux[kMaxGroupX8];
      levels_at(div(splat(-(nmax + 0.1f * is)), max), laux, sumlx, suml2);
      const F better =
          _mm256_and_ps(live, _mm256_and_ps(gt(suml2, _mm256_setzero_ps()), gt(mul(sumlx, sumlx), mul(best, suml2))));
      if (none(better)) continue;
      for (int i = 0; i < n; ++i) L[i] = pick(L[i], laux[i], better);
      scale = pick(scale, div(sumlx, suml2), better);
      best = pick(best, mul(scale, sumlx), better);
    }
  }
};

}  // namespace

void make_qkx2_quants_x8(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* scales,
                         float* neg_min, float rmin, float rdelta, int nstep, bool use_mad) {
  Qkx2Lanes s;
  s.n = n;
  s.nmax = nmax;
  s.use_mad = use_mad;
  transpose_groups(n, x, s.x);
  transpose_groups(n, weights, s.w);
  s.init_range();
  s.first_levels();
  if (nstep >= 1)  // below 1 the scalar search keeps the first levels
    for (int is = 0; is <= nstep; ++is) s.try_step(rmin, rdelta, is);
  // Flat lanes: levels 0, scale 0, -min of the range.
  for (int i = 0; i < n; ++i) s.L[i] = pick(s.L[i], _mm256_setzero_si256(), s.flat);
  _mm256_storeu_ps(scales, pick(s.scale, _mm256_setzero_ps(), s.flat));
  _mm256_storeu_ps(neg_min, _mm256_xor_ps(s.min, splat(-0.0f)));
  store_levels(n, s.L, 0, L);
}

void make_qx_quants_x8(int n, int nmax, const float* x, int8_t* L, float* scales) {
  QxLanes s;
  s.n = n;
  s.nmax = nmax;
  transpose_groups(n, x, s.x);
  s.init_max();
  s.search();
  // Lanes with max 0: levels 0 (not nmax), scale 0.
  const F zero_lane = eq(s.max, _mm256_setzero_ps());
  for (int i = 0; i < n; ++i) s.L[i] = pick(_mm256_add_epi32(s.L[i], _mm256_set1_epi32(nmax)), _mm256_setzero_si256(), zero_lane);
  _mm256_storeu_ps(scales, pick(s.scale, _mm256_setzero_ps(), zero_lane));
  store_levels(n, s.L, 0, L);
}

void levels_with_min_x8(int n, const float* x, float d, float dm, int nmax, uint8_t* L) {
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < n; i += 8) {
    const I l = clamp(nearest(div(add(_mm256_loadu_ps(x + i), splat(dm)), splat(d))), 0, nmax);
    _mm256_store_si256(reinterpret_cast<I*>(lanes), l);
    for (int k = 0; k < 8; ++k) L[i + k] = static_cast<uint8_t>(lanes[k]);
  }
}

void levels_symmetric_x8(int n, const float* x, float d, int nmax, int8_t* L) {
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < n; i += 8) {
    const I l = clamp(nearest(div(_mm256_loadu_ps(x + i), splat(d))), -nmax, nmax - 1);
    _mm256_store_si256(reinterpret_cast<I*>(lanes), l);
    for (int k = 0; k < 8; ++k) L[i + k] = static_cast<int8_t>(lanes[k] + nmax);
  }
}

}  // namespace weft::quant
