// Packed matrix products of the 32-value quantized weight types (q8_0,
// q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4) and of the super-block types whose
// groups of 32 values have one scale each (q4_K, q5_K, iq4_xs: a group is a
// block here) with a batch of f32 activations: the prompt path of mul_mat
// and mul_mat_id for them. Internal to the CPU backend.
//
// The tile engine of ops_matmul.cpp multiplies a few weight rows with a few
// activation rows along K, summing each product across vector lanes at the
// end and converting every block's scale on the way. Here, as for the
// float weights of gemm.h, a thread packs its weights once per pass over a
// chunk of activation rows: a panel of 8 weight rows is decoded to 8-bit
// integers and interleaved so that one 32-byte register holds 4 values of
// each of the 8 rows, with the rows' scales as 8 floats beside them. A
// register then multiplies the 8 rows with 4 values of an activation row
// broadcast to every lane; each lane is one output, so there are no sums
// across lanes, no shuffles and no per-block scale gathers. The mapped
// weights are never touched (the packed panel is scratch, a few dozen KiB).
//
//   const GemmShape s{a.type, m, k, b.nb[0], b.ne[1]};   // gemm.h
//   if (qgemm_preferred(a.type, m, k, n)) {               // scratch: qgemm_scratch_bytes(s)
//     AlignedScratch scratch(kc, node);
//     qgemm(kc, s, ops, scratch);                         // thread kc.ith's tiles
//   }
//
// Integer sums are exact, and every level computes the same ones: each
// block's integer dot product d_w * d_x scales once, and each output is
// one chain of fused multiply-adds over the blocks in order. So results
// are identical across thread counts and instruction-set levels (they
// differ from the tile engine's by float rounding).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gemm.h"
#include "scratch.h"
#include "simd.h"
#include "weft/core/dtype.h"

namespace weft::cpu {

inline constexpr int kQPanelRows = 8;  // weight rows per packed panel
inline constexpr int kQTileCols = 4;   // activation rows per kernel call (at most)

// One block (32 values) of a panel of 8 weight rows. Weight value n of row
// r is d[r] * v + m[r], v the integer in q[32 * (n / 4) + 4 * r + n % 4]
// (stored as v, or as v + the type's offset where the kernel takes
// unsigned weights: QForm).
struct alignas(32) QPanelBlock {
  uint8_t q[32 * kQPanelRows];
  float d[kQPanelRows];
  int32_t vsum128[kQPanelRows];  // 128 * the sum of the row's 32 signed values v
  float m[kQPanelRows];          // 0 but for q4_1 and q5_1
};
static_assert(sizeof(QPanelBlock) == 352);

// How the AVX2 kernels take a type's weights (the VNNI kernels take every
// type's as v, with unsigned activations x_q + 128 and 128 * sum(v), the
// panel's vsum128, taken off):
//   sign8:  q holds v (any int8); activations signed (the sign trick)
//   offset: q holds v + offset (0..31); offset * the sum of each
//           activation block's quants taken off the integer sum
//   min:    q holds v (0..31); the minimum term m * d_x * sum(x_q) added
enum class QForm : uint8_t { sign8, offset, min };

// A chunk of activation rows quantized as q8_0 (the rounding of the tile
// engine's activations), one column per row, laid out for broadcasts:
// block b of column j: quants at q + b * 32 (as x_q, or x_q + 128 where
// the kernel wants unsigned activations), its f16-rounded scale d[b],
// offset * sum(x_q) in isum[b] and d[b] * sum(x_q) in fsum[b].
struct QActCol {
  const uint8_t* q;
  const float* d;
  const int32_t* isum;
  const float* fsum;
};

// C[j][m0 + r] = (weight row r of the panel) . (column j), r < mv, j < nv;
// nv <= kQTileCols, mv <= kQPanelRows; nb blocks.
using QGemmTileFn = void (*)(const QPanelBlock* panel, int64_t nb, const QActCol* cols, int nv, float* const* c,
                             int64_t m0, int mv);

struct QGemmKernel {
  QGemmTileFn tile[3];  // by QForm
  bool unsigned_acts;   // activations stored as x_q + 128, weights as v for every form
  const char* name;     // "avx2", "avx512-vnni"
};

// The kernel of the level dot_kernels() chose (WEFT_CPU_SIMD included): the
// VNNI kernel where that level is AVX-512 and the CPU has VNNI, else AVX2.
// Per level: nullptr when this CPU cannot run it.
const QGemmKernel& qgemm_kernel();
const QGemmKernel* qgemm_kernel_for(Level level);
const QGemmKernel& avx2_qgemm_kernel();
const QGemmKernel& avx512_qgemm_kernel();

// Whether a has a packing here, and the form and offset its kernel takes.
bool qgemm_handles(DType a);
QForm qgemm_form(DType a);
int qgemm_offset(DType a);  // the offset of QForm::offset, else 0

// Whether the packed product beats the tile engine for a batch of n
// activation rows (measured: `weft bench ops`). Depends on the shape only.
bool qgemm_preferred(DType a, int64_t m, int64_t k, int64_t n);

// Per-thread scratch of qgemm(): a panel, a chunk of quantized activation
// rows (at most a few MiB whatever the operands) and staging for one row.
size_t qgemm_scratch_bytes(const GemmShape& s);

// Thread kc.ith's share of the product (gemm.h's GemmOperands and split).
// Stops early when kc is cancelled.
void qgemm(const KernelContext& kc, const GemmShape& s, const GemmOperands& ops, AlignedScratch& scratch);
// The same with a given kernel (tests and benchmarks).
void qgemm_with(const KernelContext& kc, const QGemmKernel& kernel, const GemmShape& s, const GemmOperands& ops,
                AlignedScratch& scratch);

// Packs weight rows [0, rows) (rows <= 8; row r at a + r * stride, nb blocks
// of type t) into nb panel blocks at dst; rows past `rows` are zero. q holds
// v + offset when add_offset, else v.
void qgemm_pack_panel(DType t, const uint8_t* a, size_t stride, int rows, int64_t nb, bool add_offset,
                      QPanelBlock* dst);

}  // namespace weft::cpu
