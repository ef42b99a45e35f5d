// flash_attn (include/weft/core/ops.h): attention fused into one pass per
// (query row, kv head, up to kChunk of its query heads), never storing the
// score matrix nor a transposed copy of V. Each thread takes a range of
// those items; for each of the item's heads:
//
//   1. scores s_j = scale * q . k_j for the positions the mask leaves
//      visible (a -inf mask entry skips the dot product: the causal half of
//      a prompt costs nothing), soft-capped when asked, plus the mask;
//   2. p_j = exp(s_j - max) and their sum, by the vector kernels (vec.h);
//   3. out = sum_j p_j v_j / sum, over the positions with p_j > 0.
//
// K and V are each read once per item, from the cache's own rows (f16 or
// f32). The scores (n_kv floats) and the output accumulator (Dv floats) of
// each head of the item are the thread's scratch, sized from the operands. Sums of products in f32
// with FMA; the exponentials' sum in double, as soft_max.
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

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

__m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
float load1(const float* p) { return *p; }
float load1(const uint16_t* p) { return f16_to_f32(*p); }

// q . k over n values.
template <class K>
float dot(const float* q, const K* k, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(k + i + 8), a1);
  }
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k + i), a0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s = std::fma(q[i], load1(k + i), s);
  return s;
}

// acc += p * v over n values.
template <class V>
void axpy(float p, const V* v, float* acc, int64_t n) {
  const __m256 pv = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, load8(v + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] = std::fma(p, load1(v + i), acc[i]);
}

// Query heads that share a kv head are taken together, up to kChunk at a
// time: each key and value row is read once for all of them (from L1)
// instead of once per head.
constexpr int64_t kChunk = 8;

template <class K, class V>
void attend_rows(const KernelContext& kc, Tensor& dst) {
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
  for (int64_t c = 0; c < kChunk && c < group; ++c) s[c] = scratch.take<float>(n_kv);
  for (int64_t c = 0; c < kChunk && c < group; ++c) acc[c] = scratch.take<float>(dv);
  for (int64_t item = r.begin; item < r.end; ++item) {
    if (kc.cancelled()) return;
    const int64_t i = item / (hkv * chunks), g = (item / chunks) % hkv, c0 = (item % chunks) * kChunk;
    const int64_t nc = std::min(kChunk, group - c0);  // heads g * group + c0 .. + nc
    const float* qh[kChunk];
    for (int64_t c = 0; c < nc; ++c) qh[c] = reinterpret_cast<const float*>(row_ptr(q, i, g * group + c0 + c, 0));
    const float* m = mask != nullptr ? reinterpret_cast<const float*>(row_ptr(*mask, i, 0, 0)) : nullptr;
    for (int64_t j = 0; j < n_kv; ++j) {
      if (m != nullptr && m[j] == -INFINITY) {
        for (int64_t c = 0; c < nc; ++c) s[c][j] = -INFINITY;
        continue;
      }
      const K* kj = reinterpret_cast<const K*>(row_ptr(k, j, g, 0));
      for (int64_t c = 0; c < nc; ++c) s[c][j] = scale * dot(qh[c], kj, d);
    }
    double sum[kChunk];
    bool visible[kChunk];
    for (int64_t c = 0; c < nc; ++c) {
      float* sc = s[c];
      if (cap > 0.0f) {  // cap * tanh(s / cap); a masked -inf stays -inf
        vk.scale(sc, 1.0f / cap, sc, n_kv);
        vk.tanh(sc, sc, n_kv);
        vk.scale(sc, cap, sc, n_kv);
        if (m != nullptr)
          for (int64_t j = 0; j < n_kv; ++j)
            if (m[j] == -INFINITY) sc[j] = -INFINITY;
      }
      float max = -INFINITY;
      for (int64_t j = 0; j < n_kv; ++j) {
        if (m != nullptr) sc[j] += m[j];
        if (sc[j] > max) max = sc[j];
      }
      visible[c] = max != -INFINITY;  // else nothing is visible: zeros
      sum[c] = visible[c] ? vk.exp_sum(sc, max, sc, n_kv) : 0.0;
      std::memset(acc[c], 0, static_cast<size_t>(dv) * sizeof(float));
    }
    for (int64_t j = 0; j < n_kv; ++j) {
      const V* vj = reinterpret_cast<const V*>(row_ptr(v, j, g, 0));
      for (int64_t c = 0; c < nc; ++c)
        if (visible[c] && s[c][j] > 0.0f) axpy(s[c][j], vj, acc[c], dv);
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

void flash_attn_op(const KernelContext& kc, Tensor& dst) {
  const bool k16 = dst.src[1]->type == DType::f16, v16 = dst.src[2]->type == DType::f16;
  if (k16 && v16) return attend_rows<uint16_t, uint16_t>(kc, dst);
  if (k16) return attend_rows<uint16_t, float>(kc, dst);
  if (v16) return attend_rows<float, uint16_t>(kc, dst);
  attend_rows<float, float>(kc, dst);
}

// What the constructor allows (f32 or f16 k and v, an f32 mask); the result
// is packed f32.
bool flash_attn_supports(const Tensor& n) {
  auto kv = [](const Tensor* t) { return t != nullptr && (t->type == DType::f32 || t->type == DType::f16); };
  return is_f32(n.src[0]) && kv(n.src[1]) && kv(n.src[2]) && (n.src[3] == nullptr || is_f32(n.src[3])) &&
         n.type == DType::f32 && n.nb[0] == sizeof(float);
}

// Scores and an output accumulator for each head of a chunk (at most kChunk:
// the scratch does not grow with the number of heads).
size_t flash_attn_scratch_bytes(const Tensor& n, int) {
  const int64_t heads = n.src[1]->ne[2] > 0 ? n.src[0]->ne[2] / n.src[1]->ne[2] : 0;
  const auto per_chunk = static_cast<size_t>(std::min(kChunk, std::max<int64_t>(heads, 1)));
  return per_chunk *
         (scratch_piece_bytes(n.src[1]->ne[1], sizeof(float)) + scratch_piece_bytes(n.src[2]->ne[0], sizeof(float)));
}

}  // namespace

const OpFamily kAttentionFamily{"flash_attn", flash_attn_supports, flash_attn_scratch_bytes, flash_attn_op};

}  // namespace weft::cpu
