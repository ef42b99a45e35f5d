// Packed, cache-blocked matrix products of float weights (f32, f16, bf16)
// with a batch of f32 activations: the prompt path of mul_mat. Internal to
// the CPU backend.
//
// For each batch, C[j][m] = sum_k A[m][k] * B[j][k]: A is the weight matrix
// (M rows of K values, rows packed), B the activation rows (N of them, K
// floats each, any element step), C the output rows (M floats, packed). As
// in BLIS, a thread packs a block of B (kc values of up to nc columns,
// k-major in panels of nr columns) and blocks of A converted to f32 (kc
// values of mc rows, in panels of mr rows), then a register-tile kernel
// multiplies an mr x kc panel of A with a kc x nr panel of B into C.
//
//   const MatMulGemm ops(...);                       // a GemmOperands
//   const GemmShape s{a.type, m, k, b.nb[0], b.ne[1]};
//   // scratch_bytes: gemm_scratch_bytes(s); in the kernel:
//   AlignedScratch scratch(kc, node);
//   gemm(kc, s, ops, scratch);                       // thread kc.ith's tiles
//
// Every output element is one chain of fused multiply-adds in k order,
// c = fma(a_k, b_k, c) from c = 0, whatever the blocking, the tile edges,
// the thread count or the instruction-set level: a block of k after the
// first reloads C and continues the chain, and both levels' kernels do the
// same operations per element. So results are identical across thread
// counts and levels (the matrix-vector path, with several partial sums per
// row, rounds differently). One chain per output errs like sqrt(K) roundings
// on random data (K u in the worst case, u = 2^-24): for K = 8192 about
// 5e-6 relative, far inside tol::kMatF32 and below the rounding of f16
// weights themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels.h"
#include "scratch.h"
#include "simd.h"
#include "weft/core/dtype.h"

namespace weft::cpu {

// The operands of a product of one or more batches, all with the same
// weight dtype, M and K. Implemented by the mul_mat kernel over tensors.
class GemmOperands {
 public:
  virtual ~GemmOperands() = default;
  virtual int64_t batches() const = 0;
  virtual int64_t cols(int64_t batch) const = 0;  // N of this batch
  // Row m of the batch's weights: a_rows(batch) + m * a_stride() bytes.
  virtual const uint8_t* a_rows(int64_t batch) const = 0;
  virtual size_t a_stride() const = 0;
  // Activation row j of the batch: K floats, element k at b_row + k * b_step.
  virtual const uint8_t* b_row(int64_t batch, int64_t j) const = 0;
  // Output row j of the batch: M floats, packed.
  virtual float* c_row(int64_t batch, int64_t j) const = 0;
};

struct GemmShape {
  DType a_type;      // f32, f16 or bf16
  int64_t m, k;      // weight rows, values per row (k >= 1)
  size_t b_step;     // bytes between the activations of one row
  int64_t max_cols;  // the largest cols(batch): sizes the scratch
};

// A register-tile kernel: C[j][m0 + r] for r < mv, j < nv (mv <= mr,
// nv <= nr) from an A panel (kc x mr, element (k, r) at a[k * mr + r]) and
// a B panel (kc x nr, element (k, j) at b[k * nr + j]); padding rows and
// columns of the panels are zero and their results are not stored.
// accumulate: C holds the chain so far (continue it), else start from 0.
using GemmTileFn = void (*)(int64_t kc, const float* a, const float* b, float* const* c, int64_t m0, int mv, int nv,
                            bool accumulate);

struct GemmKernel {
  int mr;  // panel rows of A: a multiple of 8
  int nr;  // panel columns of B
  GemmTileFn tile;
  const char* name;  // "avx2", "avx512"
};

// The kernel of the level dot_kernels() chose (WEFT_CPU_SIMD included), and
// of one level (nullptr when the CPU lacks it). Exported per level by
// gemm_avx2.cpp and gemm_avx512.cpp.
const GemmKernel& gemm_kernel();
const GemmKernel* gemm_kernel_for(Level level);
const GemmKernel& avx2_gemm_kernel();
const GemmKernel& avx512_gemm_kernel();

// Whether the packed product beats the tile engine of ops_matmul.cpp for a
// batch of n activation rows (measured: bench/gemm_bench.cpp). Depends on
// the shape only, never on the thread count.
bool gemm_preferred(DType a_type, int64_t m, int64_t k, int64_t n);

// Per-thread scratch of gemm(): one A block and one B block, sized from the
// shape and capped by the block sizes (so at most a few MiB whatever the
// operands).
size_t gemm_scratch_bytes(const GemmShape& s);

// Thread kc.ith's share of the product: tiles of the batches' outputs, split
// so that every thread gets about the same number of multiply-adds. Takes
// its two blocks from scratch (gemm_scratch_bytes of them). Stops early when
// kc is cancelled.
void gemm(const KernelContext& kc, const GemmShape& s, const GemmOperands& ops, AlignedScratch& scratch);
// The same with a given kernel and block sizes (tests and benchmarks);
// a_buf and b_buf hold mc * kc_max and kc_max * nc floats.
struct GemmBlocking {
  int64_t mc, kc, nc;  // mc a multiple of mr, nc of nr
};
GemmBlocking gemm_blocking(const GemmKernel& kernel, const GemmShape& s);
void gemm_with(const KernelContext& kc, const GemmKernel& kernel, const GemmBlocking& blk, const GemmShape& s,
               const GemmOperands& ops, float* a_buf, float* b_buf);

// How the work of a product is cut between threads (shared with qgemm.h):
// each batch into sm row slabs by sn column slabs, one unit per slab. One
// unit per batch when there are plenty of batches, else enough that the
// total is a multiple of nth; among the factorizations sm * sn of that
// count, the one whose slabs are closest to square (each operand is packed
// once per pass over the other, so packing goes as 1/rows + 1/columns).
struct GemmCut {
  int64_t sm = 1, sn = 1;
};
GemmCut gemm_cut(int64_t batches, int64_t m, int64_t n, int nth, int mr, int nr);
// Part i of s parts of [0, n), each a multiple of unit long (the last may
// be shorter or empty).
std::pair<int64_t, int64_t> gemm_slab(int64_t n, int64_t s, int64_t i, int64_t unit);

// Packing (gemm_pack.cpp, baseline level). Rows [0, rows) of A (row r at
// a + r * stride, dtype t), values [k0, k0 + kc), into panels of mr rows
// (panel p at dst + p * mr * kc); rows from `rows` up to a whole panel are
// zero. mr is a multiple of 8, at most 64; dst is 32-byte aligned.
void gemm_pack_a(DType t, const uint8_t* a, size_t stride, int64_t rows, int64_t k0, int64_t kc, int mr, float* dst);
// One panel of B: activation rows [0, n) (n <= nr; row j's element k at
// rows[j] + k * step), values [k0, k0 + kc), element (k, j) at
// dst[k * nr + j]; columns from n to nr are zero.
void gemm_pack_b(const uint8_t* const* rows, size_t step, int n, int64_t k0, int64_t kc, int nr, float* dst);

}  // namespace weft::cpu
