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

// One item: query row i, kv head g, and its query heads c0 .. c0 + nc of
// the group reading g.
struct AttnItem {
  int64_t i, g, c0, nc;
  const float* qh[kChunk];  // each head's query row
  const float* m;           // the mask's row for i, or null
  bool by_heads;            // score a transposed key tile (three heads or more)
};

// One thread's share of a flash_attn node: the node's operands and sizes,
// and the thread's scratch (each head's scores and output accumulator, the
// key tile as f32 or transposed). Lives for one compute of the node.
class AttnThread {
 public:
  AttnThread(const KernelContext& kc, Tensor& dst)
      : dst_(dst), q_(*dst.src[0]), k_(*dst.src[1]), v_(*dst.src[2]), mask_(dst.src[3]),
        sinks_(dst.src[4] != nullptr ? static_cast<const float*>(dst.src[4]->data) : nullptr),
        d_(q_.ne[0]), n_kv_(k_.ne[1]), dv_(v_.ne[0]), group_(q_.ne[2] / k_.ne[2]),
        scale_(dst.param_f32(0)), cap_(dst.param_f32(1)), vk_(vec_kernels()), ak_(attn_kernels()),
        k_loops_(ak_.rows[static_cast<int>(row_type(k_.type))]),
        v_loops_(ak_.rows[static_cast<int>(row_type(v_.type))]),
        k_bytes_(row_bytes(k_.type, d_)), v_bytes_(row_bytes(v_.type, dv_)), scratch_(kc, dst) {
    const int64_t per_item = std::min(kChunk, group_);
    for (int64_t c = 0; c < per_item; ++c) s_[c] = scratch_.take<float>(n_kv_ + kKeyTile);
    for (int64_t c = 0; c < per_item; ++c) acc_[c] = scratch_.take<float>(dv_);
    kbuf_ = scratch_.take<float>(kKeyTile * d_);
    kT_ = scratch_.take<float>(kKeyTile * d_);
  }

  // Item (i, g, chunk) of n_q * hkv * chunks, in that order.
  AttnItem item(int64_t index, int64_t chunks) const {
    const int64_t hkv = k_.ne[2];
    AttnItem it;
    it.i = index / (hkv * chunks);
    it.g = (index / chunks) % hkv;
    it.c0 = (index % chunks) * kChunk;
    it.nc = std::min(kChunk, group_ - it.c0);
    for (int64_t c = 0; c < it.nc; ++c) {
      it.qh[c] = reinterpret_cast<const float*>(row_ptr(q_, it.i, it.g * group_ + it.c0 + c, 0));
    }
    it.m = mask_ != nullptr ? reinterpret_cast<const float*>(row_ptr(*mask_, it.i, 0, 0)) : nullptr;
    // Three heads or more score a transposed tile (no sums across lanes, a
    // key value loaded once for all heads; measured on the demo model's 3
    // heads per kv head, decode after 4000 positions: 78 tokens/s against
    // 68 by dot products); one or two take dot products.
    it.by_heads = it.nc >= 3 && d_ > 0 && d_ % 16 == 0;
    return it;
  }

  void run(const AttnItem& it) {
    score_keys(it);
    double sum[kChunk];
    bool visible[kChunk];
    if (softmax(it, sum, visible)) accumulate_values(it);
    write_out(it, sum, visible);
  }

 private:
  // 1. Scores, a tile of keys at a time (s has kKeyTile floats of room past
  // n_kv for the last tile's unused lanes, which repeat its last key).
  void score_keys(const AttnItem& it) {
    for (int64_t j0 = 0; j0 < n_kv_; j0 += kKeyTile) {
      const int64_t n = std::min(kKeyTile, n_kv_ - j0);
      // A hidden key's score is 0 until the mask adds its -inf: finite
      // whatever its row holds, and no -inf * 0 when scale is 0.
      if (all_hidden(it.m, j0, n)) {
        for (int64_t c = 0; c < it.nc; ++c) std::fill_n(s_[c] + j0, n, 0.0f);
        continue;
      }
      prefetch_rows(k_, j0 + kKeyPrefetch, j0 + kKeyPrefetch + kKeyTile, it.g, k_bytes_);
      for (int64_t j = 0; j < n; ++j) krows_[j] = row_ptr(k_, j0 + j, it.g, 0);
      for (int64_t j = n; j < kKeyTile; ++j) krows_[j] = krows_[n - 1];
      if (it.by_heads) {
        k_loops_.transpose_keys(krows_, d_, kT_);
        float* sj[kChunk];
        for (int64_t c = 0; c < it.nc; ++c) sj[c] = s_[c] + j0;
        ak_.score_heads[it.nc - 1](it.qh, kT_, d_, sj);
      } else {
        score_by_dots(it, j0);
      }
      if (it.m != nullptr)
        for (int64_t j = j0; j < j0 + n; ++j)
          if (it.m[j] == -INFINITY)
            for (int64_t c = 0; c < it.nc; ++c) s_[c][j] = 0.0f;
    }
  }

  // The key tile at j0 (krows_) as f32 rows, scored by dot products per head.
  void score_by_dots(const AttnItem& it, int64_t j0) {
    for (int64_t j = 0; j < kKeyTile; ++j) {
      if (k_.type == DType::f32) {  // read in place
        kt_[j] = reinterpret_cast<const float*>(krows_[j]);
      } else {
        k_loops_.to_f32(krows_[j], kbuf_ + j * d_, d_);
        kt_[j] = kbuf_ + j * d_;
      }
    }
    for (int64_t c = 0; c < it.nc; ++c)
      for (int64_t p0 = 0; p0 < kKeyTile; p0 += kAttnKeyTile) ak_.score_tile(it.qh[c], kt_ + p0, d_, s_[c] + j0 + p0);
  }

  // 2. Scale, soft-cap, mask, max and exponentials, per head; clears the
  // accumulators. Whether any head sees a key.
  bool softmax(const AttnItem& it, double* sum, bool* visible) {
    bool any_visible = false;
    for (int64_t c = 0; c < it.nc; ++c) {
      float* sc = s_[c];
      float add_scale = scale_;
      if (cap_ > 0.0f) {  // cap * tanh(scale * s / cap), then the mask
        vk_.scale(sc, scale_, sc, n_kv_);
        vk_.softcap(sc, cap_, sc, n_kv_);
        add_scale = 1.0f;
      }
      const float max = vk_.scale_add_max(sc, add_scale, it.m, sc, n_kv_);
      visible[c] = max != -INFINITY;  // else nothing is visible: zeros
      any_visible = any_visible || visible[c];
      sum[c] = visible[c] ? vk_.exp_sum(sc, max, sc, n_kv_) : 0.0;
      // A sink joins the denominator with no value (in double, as the sum).
      if (visible[c] && sinks_ != nullptr) {
        sum[c] += std::exp(static_cast<double>(sinks_[it.g * group_ + it.c0 + c]) - max);
      }
      std::memset(acc_[c], 0, static_cast<size_t>(dv_) * sizeof(float));
    }
    return any_visible;
  }

  // 3. Values, a tile of rows at a time.
  void accumulate_values(const AttnItem& it) {
    for (int64_t j0 = 0; j0 < n_kv_; j0 += kValueTile) {
      const int64_t n = std::min(kValueTile, n_kv_ - j0);
      if (all_hidden(it.m, j0, n)) continue;
      prefetch_rows(v_, j0 + 2 * kValueTile, j0 + 3 * kValueTile, it.g, v_bytes_);
      for (int64_t j = 0; j < n; ++j) vrows_[j] = row_ptr(v_, j0 + j, it.g, 0);
      v_loops_.accumulate[it.nc - 1](s_, vrows_, it.m, j0, n, dv_, acc_);
    }
  }

  void write_out(const AttnItem& it, const double* sum, const bool* visible) {
    for (int64_t c = 0; c < it.nc; ++c) {
      auto* out = reinterpret_cast<float*>(row_ptr(dst_, it.g * group_ + it.c0 + c, it.i, 0));
      if (visible[c]) {
        vk_.scale(acc_[c], static_cast<float>(1.0 / sum[c]), out, dv_);
      } else {
        std::memset(out, 0, static_cast<size_t>(dv_) * sizeof(float));
      }
    }
  }

  Tensor& dst_;
  const Tensor& q_;
  const Tensor& k_;
  const Tensor& v_;
  const Tensor* mask_;
  const float* sinks_;
  const int64_t d_, n_kv_, dv_, group_;  // group_: query heads per kv head
  const float scale_, cap_;
  const VecKernels& vk_;
  const AttnKernels& ak_;
  const AttnKernels::ByRowType& k_loops_;
  const AttnKernels::ByRowType& v_loops_;
  const size_t k_bytes_, v_bytes_;
  RowScratch scratch_;
  float* s_[kChunk] = {};
  float* acc_[kChunk] = {};
  float* kbuf_ = nullptr;
  float* kT_ = nullptr;
  const uint8_t* krows_[kKeyTile] = {};
  const float* kt_[kKeyTile] = {};
  const uint8_t* vrows_[kValueTile] = {};
};

void flash_attn_op(const KernelContext& kc, Tensor& dst) {
  const int64_t n_q = dst.src[0]->ne[1], heads = dst.src[0]->ne[2], hkv = dst.src[1]->ne[2];
  const int64_t chunks = (heads / hkv + kChunk - 1) / kChunk;
  // Items: (query row, kv head, chunk of its heads), dealt to the threads in
  // turn: under a causal mask later rows cost more, and contiguous ranges
  // would leave the first threads idle.
  const int64_t n_items = n_q * hkv * chunks;
  if (kc.ith >= n_items) return;
  AttnThread thread(kc, dst);
  for (int64_t item = kc.ith; item < n_items; item += kc.nth) {
    if (kc.cancelled()) return;
    thread.run(thread.item(item, chunks));
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
