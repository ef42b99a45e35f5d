// flash_attn (include/weft/core/ops.h): attention fused into one pass per
// (query row, kv head, up to kChunk of its query heads), never storing the
// score matrix nor a transposed copy of V. Each thread takes a range of
// those items; for each:
//
//   1. scores s_j = scale * q . k_j for the positions the mask leaves
//      visible, kKeyTile keys at a time: the tile's rows are converted to
//      f32 once (f16 by F16C, q8_0 dequantized exactly) and scored for every
//      head of the item, eight dot products reduced together; a tile the
//      mask hides entirely is skipped (the causal half of a prompt costs
//      nothing). Then soft-capped when asked, plus the mask;
//   2. p_j = exp(s_j - max) and their sum, by the vector kernels (vec.h);
//   3. out = sum_j p_j v_j / sum: kValueTile value rows converted to f32
//      once, then eight output values of every head accumulated in
//      registers over the tile.
//
// K and V are each read once per item from the cache's own rows (f32, f16
// or q8_0). The scores (n_kv floats) and the output accumulator (Dv floats)
// of each head of the item, and the converted key and value tiles, are the
// thread's scratch, sized from the operands. Sums of products in f32 with
// FMA; the exponentials' sum in double, as soft_max.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

constexpr int64_t kChunk = 8;       // query heads of one kv head taken together
constexpr int64_t kKeyTile = 8;     // key rows scored together (one vector of scores)
constexpr int64_t kValueTile = 32;  // value rows converted and accumulated together

bool kv_type(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::q8_0; }

// n values of a K or V row (n a multiple of 32 for q8_0) as f32.
void row_to_f32(const VecKernels& vk, DType type, const uint8_t* src, float* dst, int64_t n) {
  if (type == DType::f32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (type == DType::f16) {
    vk.f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
  } else {  // q8_0: d * q, exact in f32
    for (int64_t b = 0; b < n / kQuantBlock; ++b, src += sizeof(BlockQ8_0)) {
      uint16_t d16;
      std::memcpy(&d16, src, sizeof d16);
      const __m256 d = _mm256_set1_ps(f16_to_f32(d16));
      const uint8_t* q = src + sizeof d16;
      for (int e = 0; e < kQuantBlock; e += 8) {
        const __m256i q32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + e)));
        _mm256_storeu_ps(dst + b * kQuantBlock + e, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q32)));
      }
    }
  }
}

// The eight sums of a[0..7] as one vector (lane p = sum of a[p]'s lanes).
__m256 reduce8(const __m256 a[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// out[p] = q . kt[p] for the kKeyTile rows of kt (each d floats, d8 of them
// in whole vectors, the rest one by one).
void score_tile(const float* q, const float* kt, int64_t d, float* out) {
  const int64_t d8 = d / 8 * 8;
  __m256 acc[kKeyTile];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t i = 0; i < d8; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int64_t p = 0; p < kKeyTile; ++p) acc[p] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kt + p * d + i), acc[p]);
  }
  _mm256_storeu_ps(out, reduce8(acc));
  for (int64_t i = d8; i < d; ++i)
    for (int64_t p = 0; p < kKeyTile; ++p) out[p] = std::fma(q[i], kt[p * d + i], out[p]);
}

// acc[c][0, dv) += sum over the tile's rows j of p[c][j] * vt[j] for NC
// heads, rows whose mask is -inf skipped; vt holds rows [j0, j0 + n) packed.
template <int NC>
void accumulate_tile(float* const* p, const float* vt, const float* m, int64_t j0, int64_t n, int64_t dv,
                     float* const* acc) {
  const int64_t dv8 = dv / 8 * 8;
  for (int64_t e = 0; e < dv8; e += 8) {
    __m256 a[NC];
    for (int c = 0; c < NC; ++c) a[c] = _mm256_loadu_ps(acc[c] + e);
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -INFINITY) continue;
      const __m256 v = _mm256_loadu_ps(vt + j * dv + e);
      for (int c = 0; c < NC; ++c) a[c] = _mm256_fmadd_ps(_mm256_set1_ps(p[c][j0 + j]), v, a[c]);
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc[c] + e, a[c]);
  }
  for (int64_t e = dv8; e < dv; ++e)
    for (int64_t j = 0; j < n; ++j) {
      if (m != nullptr && m[j0 + j] == -INFINITY) continue;
      for (int c = 0; c < NC; ++c) acc[c][e] = std::fma(p[c][j0 + j], vt[j * dv + e], acc[c][e]);
    }
}

using AccumulateFn = void (*)(float* const*, const float*, const float*, int64_t, int64_t, int64_t, float* const*);
constexpr AccumulateFn kAccumulate[kChunk] = {accumulate_tile<1>, accumulate_tile<2>, accumulate_tile<3>,
                                              accumulate_tile<4>, accumulate_tile<5>, accumulate_tile<6>,
                                              accumulate_tile<7>, accumulate_tile<8>};

// Every key position the mask hides in [j0, j0 + n)?
bool all_hidden(const float* m, int64_t j0, int64_t n) {
  if (m == nullptr) return false;
  for (int64_t j = j0; j < j0 + n; ++j)
    if (m[j] != -INFINITY) return false;
  return true;
}

void flash_attn_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const Tensor* mask = dst.src[3];
  const int64_t d = q.ne[0], n_q = q.ne[1], heads = q.ne[2];
  const int64_t n_kv = k.ne[1], dv = v.ne[0], hkv = k.ne[2];
  const int64_t group = heads / hkv;  // query heads per kv head
  const int64_t chunks = (group + kChunk - 1) / kChunk;
  const float scale = dst.param_f32(0);
  const float cap = dst.param_f32(1);
  // Items: (query row, kv head, chunk of its heads).
  const Range r = split_range(n_q * hkv * chunks, kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  const VecKernels& vk = vec_kernels();
  RowScratch scratch(kc, dst);
  float* s[kChunk];
  float* acc[kChunk];
  const int64_t per_item = std::min(kChunk, group);
  for (int64_t c = 0; c < per_item; ++c) s[c] = scratch.take<float>(n_kv + kKeyTile);
  for (int64_t c = 0; c < per_item; ++c) acc[c] = scratch.take<float>(dv);
  float* kt = scratch.take<float>(kKeyTile * d);
  float* vt = scratch.take<float>(kValueTile * dv);
  for (int64_t item = r.begin; item < r.end; ++item) {
    if (kc.cancelled()) return;
    const int64_t i = item / (hkv * chunks), g = (item / chunks) % hkv, c0 = (item % chunks) * kChunk;
    const int64_t nc = std::min(kChunk, group - c0);  // heads g * group + c0 .. + nc
    const float* qh[kChunk];
    for (int64_t c = 0; c < nc; ++c) qh[c] = reinterpret_cast<const float*>(row_ptr(q, i, g * group + c0 + c, 0));
    const float* m = mask != nullptr ? reinterpret_cast<const float*>(row_ptr(*mask, i, 0, 0)) : nullptr;

    // 1. Scores, a tile of keys at a time (s has kKeyTile floats of room
    // past n_kv for the last tile's unused lanes; kt's unused rows are 0).
    for (int64_t j0 = 0; j0 < n_kv; j0 += kKeyTile) {
      const int64_t n = std::min(kKeyTile, n_kv - j0);
      // A hidden key's score is 0 until the mask adds its -inf: finite
      // whatever its row holds, and no -inf * 0 when scale is 0.
      if (all_hidden(m, j0, n)) {
        for (int64_t c = 0; c < nc; ++c) std::fill_n(s[c] + j0, n, 0.0f);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) row_to_f32(vk, k.type, row_ptr(k, j0 + j, g, 0), kt + j * d, d);
      if (n < kKeyTile) std::fill(kt + n * d, kt + kKeyTile * d, 0.0f);
      for (int64_t c = 0; c < nc; ++c) score_tile(qh[c], kt, d, s[c] + j0);
      if (m != nullptr)
        for (int64_t j = j0; j < j0 + n; ++j)
          if (m[j] == -INFINITY)
            for (int64_t c = 0; c < nc; ++c) s[c][j] = 0.0f;
    }
    // 2. Scale, soft-cap, mask, max and exponentials, per head.
    double sum[kChunk];
    bool visible[kChunk];
    bool any_visible = false;
    for (int64_t c = 0; c < nc; ++c) {
      float* sc = s[c];
      float add_scale = scale;
      if (cap > 0.0f) {  // cap * tanh(scale * s / cap), then the mask
        vk.scale(sc, scale, sc, n_kv);
        vk.softcap(sc, cap, sc, n_kv);
        add_scale = 1.0f;
      }
      const float max = vk.scale_add_max(sc, add_scale, m, sc, n_kv);
      visible[c] = max != -INFINITY;  // else nothing is visible: zeros
      any_visible = any_visible || visible[c];
      sum[c] = visible[c] ? vk.exp_sum(sc, max, sc, n_kv) : 0.0;
      std::memset(acc[c], 0, static_cast<size_t>(dv) * sizeof(float));
    }
    // 3. Values, a tile of rows at a time.
    if (any_visible) {
      for (int64_t j0 = 0; j0 < n_kv; j0 += kValueTile) {
        const int64_t n = std::min(kValueTile, n_kv - j0);
        if (all_hidden(m, j0, n)) continue;
        for (int64_t j = 0; j < n; ++j) row_to_f32(vk, v.type, row_ptr(v, j0 + j, g, 0), vt + j * dv, dv);
        kAccumulate[nc - 1](s, vt, m, j0, n, dv, acc);
      }
    }
    for (int64_t c = 0; c < nc; ++c) {
      auto* out = reinterpret_cast<float*>(row_ptr(dst, g * group + c0 + c, i, 0));
      if (visible[c]) {
        vk.scale(acc[c], static_cast<float>(1.0 / sum[c]), out, dv);
      } else {
        std::memset(out, 0, static_cast<size_t>(dv) * sizeof(float));
      }
    }
  }
}

// What the constructor allows (f32, f16 or q8_0 k and v, an f32 mask); the
// result is packed f32.
bool flash_attn_supports(const Tensor& n) {
  auto kv = [](const Tensor* t) { return t != nullptr && kv_type(t->type); };
  return is_f32(n.src[0]) && kv(n.src[1]) && kv(n.src[2]) && (n.src[3] == nullptr || is_f32(n.src[3])) &&
         n.type == DType::f32 && n.nb[0] == sizeof(float);
}

// Scores (with a tile's room) and an output accumulator for each head of a
// chunk (at most kChunk: the scratch does not grow with the number of
// heads), and the f32 key and value tiles.
size_t flash_attn_scratch_bytes(const Tensor& n, int) {
  const int64_t heads = n.src[1]->ne[2] > 0 ? n.src[0]->ne[2] / n.src[1]->ne[2] : 0;
  const auto per_chunk = static_cast<size_t>(std::min(kChunk, std::max<int64_t>(heads, 1)));
  const int64_t d = n.src[1]->ne[0], dv = n.src[2]->ne[0], n_kv = n.src[1]->ne[1];
  return per_chunk * (scratch_piece_bytes(n_kv + kKeyTile, sizeof(float)) + scratch_piece_bytes(dv, sizeof(float))) +
         scratch_piece_bytes(kKeyTile * d, sizeof(float)) + scratch_piece_bytes(kValueTile * dv, sizeof(float));
}

}  // namespace

const OpFamily kAttentionFamily{"flash_attn", flash_attn_supports, flash_attn_scratch_bytes, flash_attn_op};

}  // namespace weft::cpu
