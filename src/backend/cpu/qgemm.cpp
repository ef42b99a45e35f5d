// qgemm(): the level's kernel, the quantized activation chunks, and the
// loops around the kernel (qgemm.h).
//
// Per unit of work (gemm_cut's slabs of a batch's rows and columns):
//   for each chunk of columns (up to kActChunkBytes of them quantized):
//     quantize the chunk's activation rows                 -> L2 / L3
//     for each panel of 8 weight rows:  pack it             -> L1 / L2
//       for each 4 columns:             tile: 8 x 4 outputs in registers
// A panel is packed once per chunk: at prompt sizes a chunk is every
// column, so each weight is decoded once per product per thread.
#include "qgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_features.h"
#include "qdot.h"

namespace weft::cpu {
namespace {

constexpr size_t kActChunkBytes = 4u << 20;  // quantized activation rows per chunk (at most)
constexpr int64_t kMinCols = 16;             // fewer activation rows: the tile engine (ops_matmul.cpp)

constexpr size_t kActBlockBytes = 32 + 3 * sizeof(float);  // quants, d, isum, fsum

size_t round_up64(size_t n) { return (n + 63) & ~static_cast<size_t>(63); }

// Bytes of one quantized column of nb blocks: q, then d, isum and fsum.
size_t act_col_bytes(int64_t nb) { return round_up64(static_cast<size_t>(nb) * kActBlockBytes); }

int64_t chunk_cols(int64_t nb, int64_t max_cols) {
  const auto fit = static_cast<int64_t>(kActChunkBytes / act_col_bytes(nb)) / kQTileCols * kQTileCols;
  const int64_t want = (std::max<int64_t>(max_cols, 1) + kQTileCols - 1) / kQTileCols * kQTileCols;
  return std::clamp<int64_t>(fit, kQTileCols, want);
}

QActCol act_col(uint8_t* chunk, int64_t nb, int64_t j) {
  uint8_t* base = chunk + static_cast<size_t>(j) * act_col_bytes(nb);
  const auto* d = reinterpret_cast<const float*>(base + 32 * nb);
  return {base, d, reinterpret_cast<const int32_t*>(d + nb), d + 2 * nb};
}

// Per-thread buffers, taken from the scratch in qgemm_scratch_bytes' order.
struct Buffers {
  QPanelBlock* panel;
  uint8_t* acts;
  BlockQ8_0* row_q8;
  float* row_f32;
};

// Quantizes activation row src (k floats, element step `step` bytes) into
// column j of the chunk as q8_0: quants (+ 128 when unsigned), f16-rounded
// scales, offset * sum and d * sum per block.
void quantize_col(const uint8_t* src, size_t step, int64_t k, int offset, bool unsigned_acts, Buffers& buf,
                  int64_t j) {
  const float* x = reinterpret_cast<const float*>(src);
  if (step != sizeof(float)) {
    for (int64_t i = 0; i < k; ++i) std::memcpy(buf.row_f32 + i, src + static_cast<size_t>(i) * step, sizeof(float));
    x = buf.row_f32;
  }
  quantize_act_row(ActType::q8_0, x, buf.row_q8, k);
  const int64_t nb = k / 32;
  uint8_t* base = buf.acts + static_cast<size_t>(j) * act_col_bytes(nb);
  auto* d = reinterpret_cast<float*>(base + 32 * nb);
  auto* isum = reinterpret_cast<int32_t*>(d + nb);
  float* fsum = d + 2 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& blk = buf.row_q8[b];
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.q));
    const __m256i u = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));  // x_q + 128
    _mm256_store_si256(reinterpret_cast<__m256i*>(base + 32 * b), unsigned_acts ? u : q);
    const __m256i s8 = _mm256_sad_epu8(u, _mm256_setzero_si256());  // 4 sums of 8 unsigned bytes
    const __m128i s4 = _mm_add_epi64(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    const auto sum = static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(s4, _mm_unpackhi_epi64(s4, s4)))) - 32 * 128;
    d[b] = f16_to_f32(blk.d);
    isum[b] = offset * sum;
    fsum[b] = d[b] * static_cast<float>(sum);
  }
}

// One unit: rows [m0, m1) and columns [n0, n1) of batch bi.
void run_unit(const KernelContext& kc, const QGemmKernel& kern, const GemmShape& s, const GemmOperands& ops,
              int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Buffers& buf) {
  const int64_t nb = s.k / 32;
  const int64_t nc = chunk_cols(nb, s.max_cols);
  const QForm form = qgemm_form(s.a_type);
  const int offset = kern.unsigned_acts ? 0 : qgemm_offset(s.a_type);
  const QGemmTileFn tile = kern.tile[static_cast<int>(form)];
  const uint8_t* a_rows = ops.a_rows(bi);
  const size_t a_stride = ops.a_stride();
  for (int64_t jc = n0; jc < n1; jc += nc) {
    const int64_t ncur = std::min(nc, n1 - jc);
    for (int64_t j = 0; j < ncur; ++j) {
      if (kc.cancelled()) return;
      quantize_col(ops.b_row(bi, jc + j), s.b_step, s.k, offset, kern.unsigned_acts, buf, j);
    }
    for (int64_t ic = m0; ic < m1; ic += kQPanelRows) {
      if (kc.cancelled()) return;
      const int mv = static_cast<int>(std::min<int64_t>(kQPanelRows, m1 - ic));
      qgemm_pack_panel(s.a_type, a_rows + static_cast<size_t>(ic) * a_stride, a_stride, mv, nb,
                       !kern.unsigned_acts && form == QForm::offset, buf.panel);
      for (int64_t jr = 0; jr < ncur; jr += kQTileCols) {
        const int nv = static_cast<int>(std::min<int64_t>(kQTileCols, ncur - jr));
        QActCol cols[kQTileCols];
        float* c[kQTileCols];
        for (int j = 0; j < nv; ++j) {
          cols[j] = act_col(buf.acts, nb, jr + j);
          c[j] = ops.c_row(bi, jc + jr + j);
        }
        tile(buf.panel, nb, cols, nv, c, ic, mv);
      }
    }
  }
}

}  // namespace

const QGemmKernel* qgemm_kernel_for(Level level) {
  if (dot_kernels_for(level) == nullptr) return nullptr;
  if (level == Level::avx2) return &avx2_qgemm_kernel();
  return cpu_features().avx512vnni ? &avx512_qgemm_kernel() : nullptr;
}

const QGemmKernel& qgemm_kernel() {
  static const QGemmKernel* const best = [] {
    const QGemmKernel* k = std::strcmp(dot_kernels().name, "avx512") == 0 ? qgemm_kernel_for(Level::avx512) : nullptr;
    return k != nullptr ? k : &avx2_qgemm_kernel();
  }();
  return *best;
}

bool qgemm_preferred(DType a, int64_t m, int64_t k, int64_t n) {
  return qgemm_handles(a) && m >= 1 && k >= 32 && k % traits(a).block_size == 0 && n >= kMinCols;
}

size_t qgemm_scratch_bytes(const GemmShape& s) {
  const int64_t nb = s.k / 32;
  return kScratchAlign + scratch_piece_bytes(nb, sizeof(QPanelBlock)) +
         scratch_piece_bytes(chunk_cols(nb, s.max_cols), act_col_bytes(nb)) +
         scratch_piece_bytes(nb, sizeof(BlockQ8_0)) + scratch_piece_bytes(s.k, sizeof(float));
}

void qgemm_with(const KernelContext& kc, const QGemmKernel& kern, const GemmShape& s, const GemmOperands& ops,
                AlignedScratch& scratch) {
  const int64_t nb = s.k / 32;
  Buffers buf;
  buf.panel = scratch.take<QPanelBlock>(nb);
  buf.acts = scratch.take<uint8_t>(chunk_cols(nb, s.max_cols) * static_cast<int64_t>(act_col_bytes(nb)));
  buf.row_q8 = scratch.take<BlockQ8_0>(nb);
  buf.row_f32 = scratch.take<float>(s.k);
  const int64_t batches = ops.batches();
  if (batches == 0 || s.m == 0) return;
  const GemmCut cut = gemm_cut(batches, s.m, s.max_cols, kc.nth, kQPanelRows, kQTileCols);
  const int64_t per = cut.sm * cut.sn;
  const Range r = split_range(batches * per, kc.ith, kc.nth);
  for (int64_t w = r.begin; w < r.end; ++w) {
    const int64_t bi = w / per;
    const auto [m0, m1] = gemm_slab(s.m, cut.sm, (w % per) / cut.sn, kQPanelRows);
    const auto [n0, n1] = gemm_slab(ops.cols(bi), cut.sn, w % cut.sn, kQTileCols);
    if (m0 < m1 && n0 < n1) run_unit(kc, kern, s, ops, bi, m0, m1, n0, n1, buf);
    if (kc.cancelled()) return;
  }
}

void qgemm(const KernelContext& kc, const GemmShape& s, const GemmOperands& ops, AlignedScratch& scratch) {
  qgemm_with(kc, qgemm_kernel(), s, ops, scratch);
}

}  // namespace weft::cpu
