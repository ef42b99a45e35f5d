// flash_attn (include/weft/core/ops.h): attention fused into one pass per
// (query row, kv head, up to kChunk of its query heads), never storing the
// score matrix nor a transposed copy of V. The items are dealt to the
// threads in turn; for each:
//
//   1. scores s_j = scale * q . k_j for the positions the mask leaves
//      visible, kKeyTile keys at a time: the tile's rows are turned into
//      f32 once (f32 rows read in place, f16 by F16C, q8_0 dequantized
//      exactly) and scored for every head of the item: transposed, by
//      chains of FMAs per head, or by dot products, eight reduced together, for
//      fewer than three heads; a tile the mask hides entirely is skipped (the
//      causal half of a prompt costs nothing). Then soft-capped when
//      asked, plus the mask;
//   2. p_j = exp(s_j - max) and their sum, by the vector kernels (vec.h),
//      plus exp(sink - max) for the head's sink when there are sinks;
//   3. out = sum_j p_j v_j / sum, kValueTile value rows at a time: each
//      vector of a row read (and converted) once, in place, for a vector of
//      output values of every head accumulated in registers over the tile.
//
// The inner loops of 1 and 3 are attn_kernels.h's, per instruction-set
// level. K and V are each read once per item from the cache's own rows
// (f32, f16 or q8_0), asked for ahead of use. The scores (n_kv floats) and
// the output accumulator (Dv floats) of each head of the item, and the
// converted key and value tiles, are the thread's scratch, sized from the
// operands. Sums of products in f32 with FMA; the exponentials' sum in
// double, as soft_max.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn_kernels.h"
#include "kernels.h"
#include "scratch.h"
#include "vec.h"
#include "weft/core/dtype.h"

namespace weft::cpu {
namespace {

constexpr int64_t kChunk = kAttnMaxHeads;    // query heads of one kv head taken together
constexpr int64_t kKeyTile = kAttnHeadsTile;  // key rows converted and scored together
constexpr int64_t kValueTile = 32;           // value rows converted and accumulated together
constexpr int64_t kKeyPrefetch = 64;         // how far ahead key rows are asked for

bool kv_type(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::q8_0; }

AttnRow row_type(DType t) { return t == DType::f32 ? AttnRow::f32 : t == DType::f16 ? AttnRow::f16 : AttnRow::q8_0; }

// Asks for rows [j0, j1) of head g of t (bytes each) ahead of their use.
// Measured with a model's cache (a head's rows in one run): decode after
// 32768 positions, keys and values read from memory, 3.0-3.9 ms with it
// against 4.1-4.2 without (`weft bench ops --filter "decode kv=32768"`);
// with the earlier layout (a head's bytes every row stride) it mattered
// more.
void prefetch_rows(const Tensor& t, int64_t j0, int64_t j1, int64_t g, size_t bytes) {
  for (int64_t j = j0; j < std::min(j1, t.ne[1]); ++j) {
    const char* row = reinterpret_cast<const char*>(row_ptr(t, j, g, 0));
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
  }
}

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
  const float* sinks = dst.src[4] != nullptr ? static_cast<const float*>(dst.src[4]->data) : nullptr;
  const int64_t d = q.ne[0], n_q = q.ne[1], heads = q.ne[2];
  const int64_t n_kv = k.ne[1], dv = v.ne[0], hkv = k.ne[2];
  const int64_t group = heads / hkv;  // query heads per kv head
  const int64_t chunks = (group + kChunk - 1) / kChunk;
  const float scale = dst.param_f32(0);
  const float cap = dst.param_f32(1);
  // Items: (query row, kv head, chunk of its heads), dealt to the threads in
  // turn: under a causal mask later rows cost more, and contiguous ranges
  // would leave the first threads idle.
  const int64_t n_items = n_q * hkv * chunks;
  if (kc.ith >= n_items) return;

  const VecKernels& vk = vec_kernels();
  const AttnKernels& ak = attn_kernels();
  RowScratch scratch(kc, dst);
  float* s[kChunk];
  float* acc[kChunk];
  const int64_t per_item = std::min(kChunk, group);
  for (int64_t c = 0; c < per_item; ++c) s[c] = scratch.take<float>(n_kv + kKeyTile);
  for (int64_t c = 0; c < per_item; ++c) acc[c] = scratch.take<float>(dv);
  float* kbuf = scratch.take<float>(kKeyTile * d);
  float* kT = scratch.take<float>(kKeyTile * d);
  const uint8_t* krows[kKeyTile];
  const float* kt[kKeyTile];
  const uint8_t* vrows[kValueTile];
  const AttnKernels::ByRowType& k_loops = ak.rows[static_cast<int>(row_type(k.type))];
  const AttnKernels::ByRowType& v_loops = ak.rows[static_cast<int>(row_type(v.type))];
  const size_t k_bytes = row_bytes(k.type, d), v_bytes = row_bytes(v.type, dv);
  for (int64_t item = kc.ith; item < n_items; item += kc.nth) {
    if (kc.cancelled()) return;
    const int64_t i = item / (hkv * chunks), g = (item / chunks) % hkv, c0 = (item % chunks) * kChunk;
    const int64_t nc = std::min(kChunk, group - c0);  // heads g * group + c0 .. + nc
    const float* qh[kChunk];
    for (int64_t c = 0; c < nc; ++c) qh[c] = reinterpret_cast<const float*>(row_ptr(q, i, g * group + c0 + c, 0));
    const float* m = mask != nullptr ? reinterpret_cast<const float*>(row_ptr(*mask, i, 0, 0)) : nullptr;
    // Three heads or more score a transposed tile (no sums across lanes, a
    // key value loaded once for all heads; measured on the demo model's 3
    // heads per kv head, decode after 4000 positions: 78 tokens/s against
    // 68 by dot products); one or two take dot products.
    const bool by_heads = nc >= 3 && d > 0 && d % 16 == 0;

    // 1. Scores, a tile of keys at a time (s has kKeyTile floats of room
    // past n_kv for the last tile's unused lanes, which repeat its last key).
    for (int64_t j0 = 0; j0 < n_kv; j0 += kKeyTile) {
      const int64_t n = std::min(kKeyTile, n_kv - j0);
      // A hidden key's score is 0 until the mask adds its -inf: finite
      // whatever its row holds, and no -inf * 0 when scale is 0.
      if (all_hidden(m, j0, n)) {
        for (int64_t c = 0; c < nc; ++c) std::fill_n(s[c] + j0, n, 0.0f);
        continue;
      }
      prefetch_rows(k, j0 + kKeyPrefetch, j0 + kKeyPrefetch + kKeyTile, g, k_bytes);
      for (int64_t j = 0; j < n; ++j) krows[j] = row_ptr(k, j0 + j, g, 0);
      for (int64_t j = n; j < kKeyTile; ++j) krows[j] = krows[n - 1];
      if (by_heads) {
        k_loops.transpose_keys(krows, d, kT);
        float* sj[kChunk];
        for (int64_t c = 0; c < nc; ++c) sj[c] = s[c] + j0;
        ak.score_heads[nc - 1](qh, kT, d, sj);
      } else {
        for (int64_t j = 0; j < kKeyTile; ++j) {
          if (k.type == DType::f32) {  // read in place
            kt[j] = reinterpret_cast<const float*>(krows[j]);
          } else {
            k_loops.to_f32(krows[j], kbuf + j * d, d);
            kt[j] = kbuf + j * d;
          }
        }
        for (int64_t c = 0; c < nc; ++c)
          for (int64_t p0 = 0; p0 < kKeyTile; p0 += kAttnKeyTile) ak.score_tile(qh[c], kt + p0, d, s[c] + j0 + p0);
      }
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
      // A sink joins the denominator with no value (in double, as the sum).
      if (visible[c] && sinks != nullptr) sum[c] += std::exp(static_cast<double>(sinks[g * group + c0 + c]) - max);
      std::memset(acc[c], 0, static_cast<size_t>(dv) * sizeof(float));
    }
    // 3. Values, a tile of rows at a time.
    if (any_visible) {
      for (int64_t j0 = 0; j0 < n_kv; j0 += kValueTile) {
        const int64_t n = std::min(kValueTile, n_kv - j0);
        if (all_hidden(m, j0, n)) continue;
        prefetch_rows(v, j0 + 2 * kValueTile, j0 + 3 * kValueTile, g, v_bytes);
        for (int64_t j = 0; j < n; ++j) vrows[j] = row_ptr(v, j0 + j, g, 0);
        v_loops.accumulate[nc - 1](s, vrows, m, j0, n, dv, acc);
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

// What the constructor allows (f32, f16 or q8_0 k and v, an f32 mask and
// sinks); the result is packed f32.
bool flash_attn_supports(const Tensor& n) {
  auto kv = [](const Tensor* t) { return t != nullptr && kv_type(t->type); };
  return is_f32(n.src[0]) && kv(n.src[1]) && kv(n.src[2]) && (n.src[3] == nullptr || is_f32(n.src[3])) &&
         (n.src[4] == nullptr || is_f32(n.src[4])) &&
         n.type == DType::f32 && n.nb[0] == sizeof(float);
}

// Scores (with a tile's room) and an output accumulator for each head of a
// chunk (at most kChunk: the scratch does not grow with the number of
// heads), and the f32 key tile (for dot products) or its transpose.
size_t flash_attn_scratch_bytes(const Tensor& n, int) {
  const int64_t heads = n.src[1]->ne[2] > 0 ? n.src[0]->ne[2] / n.src[1]->ne[2] : 0;
  const auto per_chunk = static_cast<size_t>(std::min(kChunk, std::max<int64_t>(heads, 1)));
  const int64_t d = n.src[1]->ne[0], dv = n.src[2]->ne[0], n_kv = n.src[1]->ne[1];
  return per_chunk * (scratch_piece_bytes(n_kv + kKeyTile, sizeof(float)) + scratch_piece_bytes(dv, sizeof(float))) +
         2 * scratch_piece_bytes(kKeyTile * d, sizeof(float));
}

}  // namespace

const OpFamily kAttentionFamily{"flash_attn", flash_attn_supports, flash_attn_scratch_bytes, flash_attn_op};

}  // namespace weft::cpu
