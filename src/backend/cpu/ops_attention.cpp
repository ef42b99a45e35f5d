// flash_attn (include/weft/core/ops.h): attention fused into one pass per
// (query row, head), never storing the score matrix nor a transposed copy
// of V. Each thread takes a range of the n_q * H rows; for one row:
//
//   1. scores s_j = scale * q . k_j for the positions the mask leaves
//      visible (a -inf mask entry skips the dot product: the causal half of
//      a prompt costs nothing), soft-capped when asked, plus the mask;
//   2. p_j = exp(s_j - max) and their sum, by the vector kernels (vec.h);
//   3. out = sum_j p_j v_j / sum, over the positions with p_j > 0.
//
// K and V are each read once per row, from the cache's own rows (f16 or
// f32). The scores (n_kv floats) and the output accumulator (Dv floats) are
// the thread's scratch, sized from the operands. Sums of products in f32
// with FMA; the exponentials' sum in double, as soft_max.
#include <immintrin.h>

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

template <class K, class V>
void attend_rows(const KernelContext& kc, Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const Tensor* mask = dst.src[3];
  const int64_t d = q.ne[0], n_q = q.ne[1], heads = q.ne[2];
  const int64_t n_kv = k.ne[1], dv = v.ne[0];
  const int64_t group = heads / k.ne[2];  // query heads per kv head
  const float scale = dst.param_f32(0);
  const float cap = dst.param_f32(1);
  const Range r = split_range(n_q * heads, kc.ith, kc.nth);
  if (r.begin >= r.end) return;

  const VecKernels& vk = vec_kernels();
  RowScratch scratch(kc, dst);
  float* s = scratch.take<float>(n_kv);
  float* acc = scratch.take<float>(dv);
  for (int64_t row = r.begin; row < r.end; ++row) {
    if (kc.cancelled()) return;
    const int64_t i = row / heads, h = row % heads, g = h / group;
    const auto* qi = reinterpret_cast<const float*>(row_ptr(q, i, h, 0));
    const float* m = mask != nullptr ? reinterpret_cast<const float*>(row_ptr(*mask, i, 0, 0)) : nullptr;
    for (int64_t j = 0; j < n_kv; ++j) {
      if (m != nullptr && m[j] == -INFINITY) {
        s[j] = -INFINITY;
        continue;
      }
      s[j] = scale * dot(qi, reinterpret_cast<const K*>(row_ptr(k, j, g, 0)), d);
    }
    if (cap > 0.0f) {  // cap * tanh(s / cap); a masked -inf stays -inf
      vk.scale(s, 1.0f / cap, s, n_kv);
      vk.tanh(s, s, n_kv);
      vk.scale(s, cap, s, n_kv);
      if (m != nullptr)
        for (int64_t j = 0; j < n_kv; ++j)
          if (m[j] == -INFINITY) s[j] = -INFINITY;
    }
    float max = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) {
      if (m != nullptr) s[j] += m[j];
      if (s[j] > max) max = s[j];
    }
    auto* out = reinterpret_cast<float*>(row_ptr(dst, h, i, 0));
    if (max == -INFINITY) {  // nothing visible
      std::memset(out, 0, static_cast<size_t>(dv) * sizeof(float));
      continue;
    }
    const double sum = vk.exp_sum(s, max, s, n_kv);
    std::memset(acc, 0, static_cast<size_t>(dv) * sizeof(float));
    for (int64_t j = 0; j < n_kv; ++j)
      if (s[j] > 0.0f) axpy(s[j], reinterpret_cast<const V*>(row_ptr(v, j, g, 0)), acc, dv);
    vk.scale(acc, static_cast<float>(1.0 / sum), out, dv);
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

// The row's scores and its output accumulator.
size_t flash_attn_scratch_bytes(const Tensor& n, int) {
  return scratch_piece_bytes(n.src[1]->ne[1], sizeof(float)) + scratch_piece_bytes(n.src[2]->ne[0], sizeof(float));
}

}  // namespace

const OpFamily kAttentionFamily{"flash_attn", flash_attn_supports, flash_attn_scratch_bytes, flash_attn_op};

}  // namespace weft::cpu
