// Matrix products: mul_mat and mul_mat_id.
//
// Both run on one tiled engine. A product is a list of batches, each a weight
// matrix [K, M] against cols(b) activation rows. The register tile is
// kTileRows weight rows by kTileCols activation rows (simd.h); around it, a
// block of weight rows (about kWeightBlockBytes) stays in cache while every
// group of activation rows passes over it. Threads split the row groups of
// all batches; when those are too few to share, they split the activation
// rows instead. Tiles always start at multiples of kTileRows and kTileCols,
// so results do not depend on the number of threads.
//
// Quantized weights take 8-bit activations (qdot.h): each thread quantizes
// an activation row the first time one of its tiles needs it, into its own
// scratch, and reuses it for every block of weight rows. A row is quantized
// the same way whichever thread does it, so results stay independent of the
// thread count.
//
// Float weights against a batch of activation rows (a prompt) take the
// packed, cache-blocked product of gemm.h instead, where it is faster
// (gemm_preferred), and the 32-value quantized types the packed product
// of qgemm.h (qgemm_preferred).
#include <algorithm>
#include <cstring>

#include "gemm.h"
#include "kernels.h"
#include "qdot.h"
#include "qgemm.h"
#include "scratch.h"
#include "simd.h"

namespace weft::cpu {
namespace {

constexpr size_t kWeightBlockBytes = 128 * 1024;
constexpr int64_t kGroupsPerThread = 2;  // fewer row groups per thread: split columns

// An f32 row of n elements spaced `stride` bytes apart: the row itself when
// packed, else a copy in buf.
const float* f32_row(const uint8_t* p, size_t stride, int64_t n, float* buf) {
  if (stride == sizeof(float)) return reinterpret_cast<const float*>(p);
  for (int64_t i = 0; i < n; ++i) buf[i] = *reinterpret_cast<const float*>(p + i * stride);
  return buf;
}

// Scratch of the 8-bit activations: row r of the activations at
// rows + r * row_bytes once ready[r] is set.
struct QuantizedActs {
  const QuantDot* dot = nullptr;  // nullptr: float weights, float activations
  size_t row_bytes = 0;
  uint8_t* rows = nullptr;
  uint8_t* ready = nullptr;
};

// Problem interface used by the engine:
//   int64_t batches() const;  int64_t cols(int64_t b) const;
//   const uint8_t* w_row(int64_t b, int64_t m) const;  size_t w_stride() const;
//   const float* x_row(int64_t b, int64_t j, float* buf) const;  // buf: K floats
//   int64_t x_index(int64_t b, int64_t j) const;  // activation row: [0, x_rows())
//   int64_t x_rows() const;
//   float* out_row(int64_t b, int64_t j) const;                  // M floats, packed
template <class P>
class Engine {
 public:
  Engine(const KernelContext& kc, const P& p, TileDotFn dot, const QuantizedActs& q, int64_t k, int64_t m,
         size_t w_row_bytes, float* xbuf)
      : kc_(kc), p_(p), dot_(dot), q_(q), k_(k), m_(m), groups_((m + kTileRows - 1) / kTileRows), xbuf_(xbuf) {
    const int64_t rows = static_cast<int64_t>(kWeightBlockBytes / std::max<size_t>(w_row_bytes, 1));
    mc_ = std::max<int64_t>(1, rows / kTileRows);  // in row groups
    if (q_.dot != nullptr) std::memset(q_.ready, 0, static_cast<size_t>(p_.x_rows()));
  }

  void run(int ith, int nth) {
    const int64_t nb = p_.batches();
    if (nb == 0 || m_ == 0) return;
    int64_t total_cols = 0;
    for (int64_t b = 0; b < nb; ++b) total_cols += p_.cols(b);
    if (nb * groups_ >= kGroupsPerThread * nth || total_cols <= kTileCols) {
      split_rows(ith, nth);
    } else {
      split_cols(ith, nth, total_cols);
    }
  }

 private:
  // Row groups [g0, g1) of batch b against activation rows [j0, j1).
  void tiles(int64_t b, int64_t g0, int64_t g1, int64_t j0, int64_t j1) {
    const int64_t m0 = g0 * kTileRows;
    const int64_t m1 = std::min(m_, g1 * kTileRows);
    for (int64_t j = j0; j < j1; j += kTileCols) {
      const int nx = static_cast<int>(std::min<int64_t>(kTileCols, j1 - j));
      const float* xs[kTileCols];
      const void* xqs[kTileCols];
      float* outs[kTileCols];
      for (int i = 0; i < nx; ++i) {
        if (q_.dot != nullptr) {
          xqs[i] = quantized_x(b, j + i);
        } else {
          xs[i] = p_.x_row(b, j + i, xbuf_ != nullptr ? xbuf_ + i * k_ : nullptr);
        }
        outs[i] = p_.out_row(b, j + i);
      }
      for (int64_t m = m0; m < m1; m += kTileRows) {
        const int nw = static_cast<int>(std::min<int64_t>(kTileRows, m1 - m));
        float r[kTileRows * kTileCols];
        if (q_.dot != nullptr) {
          q_.dot->tile(p_.w_row(b, m), p_.w_stride(), nw, xqs, nx, k_, r);
        } else {
          dot_(p_.w_row(b, m), p_.w_stride(), nw, xs, nx, k_, r);
        }
        for (int w = 0; w < nw; ++w)
          for (int i = 0; i < nx; ++i) outs[i][m + w] = r[w * kTileCols + i];
      }
    }
  }

  // Activation row j of batch b in 8-bit form, quantized on first use.
  const void* quantized_x(int64_t b, int64_t j) {
    const int64_t r = p_.x_index(b, j);
    uint8_t* row = q_.rows + static_cast<size_t>(r) * q_.row_bytes;
    if (q_.ready[r] == 0) {
      quantize_act_row(q_.dot->act, p_.x_row(b, j, xbuf_), row, k_);
      q_.ready[r] = 1;
    }
    return row;
  }

  // This thread's share of all batches' row groups, in blocks of mc_ groups.
  void split_rows(int ith, int nth) {
    const Range r = split_range(p_.batches() * groups_, ith, nth);
    for (int64_t g = r.begin; g < r.end;) {
      const int64_t b = g / groups_;
      const int64_t g0 = g % groups_;
      const int64_t g1 = std::min(groups_, g0 + (r.end - g));
      for (int64_t gb = g0; gb < g1; gb += mc_) {
        if (kc_.cancelled()) return;  // a block of rows at a time (~128 KiB of weights)
        tiles(b, gb, std::min(g1, gb + mc_), 0, p_.cols(b));
      }
      g += g1 - g0;
    }
  }

  // Few weight rows: share out chunks of activation rows (multiples of
  // kTileCols), each against all M weight rows.
  void split_cols(int ith, int nth, int64_t total_cols) {
    const int64_t target = kGroupsPerThread * nth;
    int64_t nc = (total_cols + target - 1) / target;
    nc = std::max<int64_t>(kTileCols, (nc + kTileCols - 1) / kTileCols * kTileCols);
    int64_t units = 0;
    for (int64_t b = 0; b < p_.batches(); ++b) units += (p_.cols(b) + nc - 1) / nc;
    const Range r = split_range(units, ith, nth);
    int64_t u = 0;
    for (int64_t b = 0; b < p_.batches() && u < r.end; ++b) {
      const int64_t n = p_.cols(b);
      for (int64_t c = 0; c < n; c += nc, ++u) {
        if (u >= r.begin && u < r.end) {
          if (kc_.cancelled()) return;
          tiles(b, 0, groups_, c, std::min(n, c + nc));
        }
      }
    }
  }

  const KernelContext& kc_;
  const P& p_;
  TileDotFn dot_;
  QuantizedActs q_;
  int64_t k_, m_, groups_, mc_;
  float* xbuf_;
};

// mul_mat: batch (i2, i3) of b uses weight matrix (i2 / r2, i3 / r3) of a.
struct MatMul {
  const Tensor& a;
  const Tensor& b;
  const Tensor& dst;
  int64_t r2, r3;

  int64_t batches() const { return b.ne[2] * b.ne[3]; }
  int64_t cols(int64_t) const { return b.ne[1]; }
  const uint8_t* w_row(int64_t bi, int64_t m) const { return row_ptr(a, m, (bi % b.ne[2]) / r2, (bi / b.ne[2]) / r3); }
  size_t w_stride() const { return a.nb[1]; }
  const float* x_row(int64_t bi, int64_t j, float* buf) const {
    return f32_row(row_ptr(b, j, bi % b.ne[2], bi / b.ne[2]), b.nb[0], b.ne[0], buf);
  }
  int64_t x_index(int64_t bi, int64_t j) const { return bi * b.ne[1] + j; }
  int64_t x_rows() const { return b.ne[1] * b.ne[2] * b.ne[3]; }
  float* out_row(int64_t bi, int64_t j) const {
    return reinterpret_cast<float*>(row_ptr(dst, j, bi % b.ne[2], bi / b.ne[2]));
  }
};

// mul_mat_id: one batch per expert that some (slot e, token t) selects; its
// columns are those pairs, encoded as t * n_used + e, in token order.
struct MatMulId {
  const Tensor& as;
  const Tensor& b;
  const Tensor& dst;
  const int64_t* experts;  // active experts
  const int64_t* offset;   // per active expert: first of its pairs
  const int64_t* pairs;
  int64_t n_active;

  int64_t batches() const { return n_active; }
  int64_t cols(int64_t bi) const { return offset[bi + 1] - offset[bi]; }
  const uint8_t* w_row(int64_t bi, int64_t m) const { return row_ptr(as, m, experts[bi], 0); }
  size_t w_stride() const { return as.nb[1]; }
  const float* x_row(int64_t bi, int64_t j, float* buf) const {
    const int64_t p = pairs[offset[bi] + j];
    const int64_t n_used = dst.ne[1];
    return f32_row(row_ptr(b, (p % n_used) % b.ne[1], p / n_used, 0), b.nb[0], b.ne[0], buf);
  }
  int64_t x_index(int64_t bi, int64_t j) const {
    const int64_t p = pairs[offset[bi] + j];
    const int64_t n_used = dst.ne[1];
    return (p / n_used) * b.ne[1] + (p % n_used) % b.ne[1];
  }
  int64_t x_rows() const { return b.ne[1] * b.ne[2]; }
  float* out_row(int64_t bi, int64_t j) const {
    const int64_t p = pairs[offset[bi] + j];
    return reinterpret_cast<float*>(row_ptr(dst, p % dst.ne[1], p / dst.ne[1], 0));
  }
};

// mul_mat's operands for gemm(): the batches of MatMul.
class MatMulGemm final : public GemmOperands {
 public:
  explicit MatMulGemm(const MatMul& p) : p_(p) {}
  int64_t batches() const override { return p_.batches(); }
  int64_t cols(int64_t) const override { return p_.b.ne[1]; }
  const uint8_t* a_rows(int64_t bi) const override { return p_.w_row(bi, 0); }
  size_t a_stride() const override { return p_.a.nb[1]; }
  const uint8_t* b_row(int64_t bi, int64_t j) const override {
    return row_ptr(p_.b, j, bi % p_.b.ne[2], bi / p_.b.ne[2]);
  }
  float* c_row(int64_t bi, int64_t j) const override { return p_.out_row(bi, j); }

 private:
  const MatMul& p_;
};

// mul_mat_id's operands for qgemm(): one batch per active expert (MatMulId).
class MatMulIdGemm final : public GemmOperands {
 public:
  explicit MatMulIdGemm(const MatMulId& p) : p_(p) {}
  int64_t batches() const override { return p_.batches(); }
  int64_t cols(int64_t bi) const override { return p_.cols(bi); }
  const uint8_t* a_rows(int64_t bi) const override { return p_.w_row(bi, 0); }
  size_t a_stride() const override { return p_.as.nb[1]; }
  const uint8_t* b_row(int64_t bi, int64_t j) const override {
    const int64_t pair = p_.pairs[p_.offset[bi] + j];
    const int64_t n_used = p_.dst.ne[1];
    return row_ptr(p_.b, (pair % n_used) % p_.b.ne[1], pair / n_used, 0);
  }
  float* c_row(int64_t bi, int64_t j) const override { return p_.out_row(bi, j); }

 private:
  const MatMulId& p_;
};

GemmShape mul_mat_gemm_shape(const Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  return {a.type, a.ne[1], a.ne[0], b.nb[0], b.ne[1]};
}

bool mul_mat_uses_gemm(const Tensor& node) {
  const Tensor& a = *node.src[0];
  return gemm_preferred(a.type, a.ne[1], a.ne[0], node.src[1]->ne[1]);
}

bool mul_mat_uses_qgemm(const Tensor& node) {
  const Tensor& a = *node.src[0];
  return qgemm_preferred(a.type, a.ne[1], a.ne[0], node.src[1]->ne[1]);
}

// mul_mat_id takes the packed product when the experts average enough
// activation rows each (a prompt), judged from the shape alone: every
// expert's product then goes the same way whatever the ids, and the
// scratch is sized for it. Any expert may get up to every pair.
GemmShape mul_mat_id_gemm_shape(const Tensor& node) {
  const Tensor& as = *node.src[0];
  const Tensor& ids = *node.src[2];
  return {as.type, as.ne[1], as.ne[0], node.src[1]->nb[0], ids.ne[0] * ids.ne[1]};
}

bool mul_mat_id_uses_qgemm(const Tensor& node) {
  const Tensor& as = *node.src[0];
  const Tensor& ids = *node.src[2];
  const int64_t pairs = ids.ne[0] * ids.ne[1];
  return as.ne[2] > 0 && qgemm_preferred(as.type, as.ne[1], as.ne[0], pairs / as.ne[2]);
}

// The expert of pair (e, t) within as: ids[e, t] - id_base (op_params[0]),
// in 64 bits so that no id and base overflow; outside [0, n_expert): none.
int64_t expert_id(const Tensor& ids, int64_t e, int64_t t, int64_t id_base) {
  return int64_t{*reinterpret_cast<const int32_t*>(elem_ptr(ids, e, t, 0, 0))} - id_base;
}

size_t xbuf_bytes(const Tensor& b) {
  return b.nb[0] == sizeof(float) ? 0 : scratch_piece_bytes(kTileCols * b.ne[0], sizeof(float));
}

// Activation rows of a product with weights a and activations b.
int64_t activation_rows(const Tensor& node) {
  const Tensor& b = *node.src[1];
  return node.op == Op::mul_mat ? b.ne[1] * b.ne[2] * b.ne[3] : b.ne[1] * b.ne[2];
}

// Scratch of the 8-bit activations (0 for float weights); taken in this order.
size_t quantized_acts_bytes(const Tensor& node) {
  const QuantDot* qd = quant_dot(node.src[0]->type);
  if (qd == nullptr) return 0;
  const int64_t rows = activation_rows(node);
  return scratch_piece_bytes(rows, act_row_bytes(qd->act, node.src[0]->ne[0])) + scratch_piece_bytes(rows, 1);
}

QuantizedActs take_quantized_acts(AlignedScratch& scratch, const Tensor& node) {
  QuantizedActs q;
  q.dot = quant_dot(node.src[0]->type);
  if (q.dot == nullptr) return q;
  const int64_t rows = activation_rows(node);
  q.row_bytes = act_row_bytes(q.dot->act, node.src[0]->ne[0]);
  q.rows = scratch.take<uint8_t>(rows * static_cast<int64_t>(q.row_bytes));
  q.ready = scratch.take<uint8_t>(rows);
  return q;
}

void mul_mat_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  AlignedScratch scratch(kc, dst);
  const MatMul p{a, b, dst, b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]};
  if (mul_mat_uses_gemm(dst)) {
    gemm(kc, mul_mat_gemm_shape(dst), MatMulGemm(p), scratch);
    return;
  }
  if (mul_mat_uses_qgemm(dst)) {
    qgemm(kc, mul_mat_gemm_shape(dst), MatMulGemm(p), scratch);
    return;
  }
  float* xbuf = b.nb[0] == sizeof(float) ? nullptr : scratch.take<float>(kTileCols * b.ne[0]);
  const QuantizedActs q = take_quantized_acts(scratch, dst);
  Engine<MatMul> engine(kc, p, dot_kernels().tile(a.type), q, a.ne[0], a.ne[1], row_bytes(a.type, a.ne[0]), xbuf);
  engine.run(kc.ith, kc.nth);
}

// A pair whose expert is outside as (another device's slice of an expert
// split, or a bad id, which a worker thread could not report) is written as
// zeros and costs nothing more.
void mul_mat_id_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& as = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const Tensor& ids = *dst.src[2];
  const int64_t n_expert = as.ne[2];
  const int64_t base = dst.op_params[0];
  const int64_t n_used = ids.ne[0];
  const int64_t n_tokens = ids.ne[1];
  const int64_t n_pairs = n_used * n_tokens;

  AlignedScratch scratch(kc, dst);
  float* xbuf = b.nb[0] == sizeof(float) ? nullptr : scratch.take<float>(kTileCols * b.ne[0]);
  int64_t* count = scratch.take<int64_t>(n_expert + 1);
  int64_t* experts = scratch.take<int64_t>(n_expert);
  int64_t* offset = scratch.take<int64_t>(n_expert + 1);
  int64_t* pairs = scratch.take<int64_t>(n_pairs);

  // Every thread groups the pairs by expert for itself (cheap next to the
  // products), so no barrier is needed.
  std::fill(count, count + n_expert + 1, 0);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t e = 0; e < n_used; ++e) {
      const int64_t id = expert_id(ids, e, t, base);
      if (id >= 0 && id < n_expert) ++count[id];
    }
  int64_t n_active = 0;
  offset[0] = 0;
  for (int64_t x = 0; x < n_expert; ++x) {
    if (count[x] == 0) continue;
    experts[n_active] = x;
    offset[n_active + 1] = offset[n_active] + count[x];
    count[x] = offset[n_active];  // now: next free slot of expert x
    ++n_active;
  }
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t e = 0; e < n_used; ++e) {
      const int64_t id = expert_id(ids, e, t, base);
      if (id >= 0 && id < n_expert) pairs[count[id]++] = t * n_used + e;
    }

  const Range zr = split_range(n_pairs, kc.ith, kc.nth);
  for (int64_t p = zr.begin; p < zr.end; ++p) {
    const int64_t e = p % n_used, t = p / n_used;
    const int64_t id = expert_id(ids, e, t, base);
    if (id < 0 || id >= n_expert) {
      float* out = reinterpret_cast<float*>(row_ptr(dst, e, t, 0));
      std::fill(out, out + dst.ne[0], 0.0f);
    }
  }

  const MatMulId p{as, b, dst, experts, offset, pairs, n_active};
  if (mul_mat_id_uses_qgemm(dst)) {
    qgemm(kc, mul_mat_id_gemm_shape(dst), MatMulIdGemm(p), scratch);
    return;
  }
  const QuantizedActs q = take_quantized_acts(scratch, dst);
  Engine<MatMulId> engine(kc, p, dot_kernels().tile(as.type), q, as.ne[0], as.ne[1], row_bytes(as.type, as.ne[0]),
                          xbuf);
  engine.run(kc.ith, kc.nth);
}

// Weights of any dtype but i32 with packed rows (the tile kernels read whole
// rows of blocks); f32 activations.
bool mul_mat_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  return a && is_weight_type(a->type) && a->rows_contiguous() && is_f32(n.src[1]);
}

// The packed blocks of gemm(); else packed copies of a tile's strided
// activation rows, and the 8-bit activations for quantized weights; none for
// packed f32 against float weights.
size_t mul_mat_scratch_bytes(const Tensor& n, int) {
  if (mul_mat_uses_gemm(n)) return gemm_scratch_bytes(mul_mat_gemm_shape(n));
  if (mul_mat_uses_qgemm(n)) return qgemm_scratch_bytes(mul_mat_gemm_shape(n));
  const size_t x = xbuf_bytes(*n.src[1]) + quantized_acts_bytes(n);
  return x == 0 ? 0 : x + kScratchAlign;
}

// As mul_mat, with i32 expert ids.
bool mul_mat_id_supports(const Tensor& n) { return mul_mat_supports(n) && is_i32(n.src[2]); }

// As mul_mat, plus the grouping of (slot, token) pairs by expert, in the
// order mul_mat_id_op takes them.
size_t mul_mat_id_scratch_bytes(const Tensor& n, int) {
  const int64_t n_expert = n.src[0]->ne[2];
  const int64_t n_pairs = n.src[2]->ne[0] * n.src[2]->ne[1];
  return kScratchAlign + xbuf_bytes(*n.src[1]) + 2 * scratch_piece_bytes(n_expert + 1, sizeof(int64_t)) +
         scratch_piece_bytes(n_expert, sizeof(int64_t)) + scratch_piece_bytes(n_pairs, sizeof(int64_t)) +
         quantized_acts_bytes(n) + (mul_mat_id_uses_qgemm(n) ? qgemm_scratch_bytes(mul_mat_id_gemm_shape(n)) : 0);
}

}  // namespace

const OpFamily kMulMatFamily{"mul_mat", mul_mat_supports, mul_mat_scratch_bytes, mul_mat_op};
const OpFamily kMulMatIdFamily{"mul_mat_id", mul_mat_id_supports, mul_mat_id_scratch_bytes, mul_mat_id_op};

}  // namespace weft::cpu
