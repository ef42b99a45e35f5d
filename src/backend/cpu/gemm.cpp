// gemm(): blocking, the split between threads, and the choice of level.
//
// Loops, per unit of work (a batch's block of rows and columns of C):
//   for each nc columns:                pack B block (kc x nc)    -> L2 / L3
//     for each kc values of k:
//       for each mc rows:               pack A block (mc x kc)    -> L2
//         for each nr columns:          B panel (kc x nr)         -> L1
//           for each mr rows:           tile: mr x nr of C in registers
// Units cut rows and columns so that all threads get about the same work
// and a thread's two packed operands stay about square (each is packed
// once per pass over the other, so the packing work goes as 1/rows +
// 1/columns of the unit).
#include "gemm.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace weft::cpu {
namespace {

constexpr int64_t kKc = 256;   // values of k per block: a B panel of kc x nr floats fits L1
constexpr int64_t kMc = 256;   // rows of A per block: 256 KiB of f32 at kc = 256
constexpr int64_t kNc = 1024;  // columns of B per block (at most): 1 MiB at kc = 256

int64_t round_up(int64_t n, int64_t unit) {
  return (n + unit - 1) / unit * unit;
}

// One unit of work: rows [m0, m1) and columns [n0, n1) of batch bi.
struct Unit {
  int64_t bi, m0, m1, n0, n1;
};

void run_unit(const KernelContext& kc, const GemmKernel& kern, const GemmBlocking& blk, const GemmShape& s,
              const GemmOperands& ops, const Unit& u, float* a_buf, float* b_buf) {
  const int mr = kern.mr, nr = kern.nr;
  const uint8_t* a_rows = ops.a_rows(u.bi);
  const size_t a_stride = ops.a_stride();
  const uint8_t* b_rows[16];
  float* c_rows[16];
  for (int64_t jc = u.n0; jc < u.n1; jc += blk.nc) {
    const int64_t ncur = std::min(blk.nc, u.n1 - jc);
    for (int64_t pc = 0; pc < s.k; pc += blk.kc) {
      const int64_t kcur = std::min(blk.kc, s.k - pc);
      for (int64_t jr = 0; jr < ncur; jr += nr) {
        const int nv = static_cast<int>(std::min<int64_t>(nr, ncur - jr));
        for (int j = 0; j < nv; ++j) b_rows[j] = ops.b_row(u.bi, jc + jr + j);
        gemm_pack_b(b_rows, s.b_step, nv, pc, kcur, nr, b_buf + jr * kcur);
      }
      for (int64_t ic = u.m0; ic < u.m1; ic += blk.mc) {
        if (kc.cancelled()) return;
        const int64_t mcur = std::min(blk.mc, u.m1 - ic);
        gemm_pack_a(s.a_type, a_rows + static_cast<size_t>(ic) * a_stride, a_stride, mcur, pc, kcur, mr, a_buf);
        for (int64_t jr = 0; jr < ncur; jr += nr) {
          const int nv = static_cast<int>(std::min<int64_t>(nr, ncur - jr));
          for (int j = 0; j < nv; ++j) c_rows[j] = ops.c_row(u.bi, jc + jr + j);
          const float* bp = b_buf + jr * kcur;
          for (int64_t ir = 0; ir < mcur; ir += mr) {
            const int mv = static_cast<int>(std::min<int64_t>(mr, mcur - ir));
            kern.tile(kcur, a_buf + ir * kcur, bp, c_rows, ic + ir, mv, nv, pc > 0);
          }
        }
      }
    }
  }
}

}  // namespace

GemmCut gemm_cut(int64_t batches, int64_t m, int64_t n, int nth, int mr, int nr) {
  const int64_t per = batches >= 4 * static_cast<int64_t>(nth) ? 1 : nth / std::gcd<int64_t>(batches, nth);
  GemmCut best;
  double best_cost = -1;
  for (int64_t sm = 1; sm <= per; ++sm) {
    if (per % sm != 0) continue;
    const int64_t sn = per / sm;
    if (sm > 1 && (m + mr - 1) / mr < sm) continue;  // slabs of less than a panel
    if (sn > 1 && (n + nr - 1) / nr < sn) continue;
    const double rows = static_cast<double>(m) / static_cast<double>(sm);
    const double cols = static_cast<double>(n) / static_cast<double>(sn);
    const double cost = 1.0 / rows + 1.0 / cols;
    if (best_cost < 0 || cost < best_cost) {
      best = {sm, sn};
      best_cost = cost;
    }
  }
  return best;
}

std::pair<int64_t, int64_t> gemm_slab(int64_t n, int64_t s, int64_t i, int64_t unit) {
  const int64_t size = round_up((n + s - 1) / s, unit);
  return {std::min(n, i * size), std::min(n, (i + 1) * size)};
}

const GemmKernel* gemm_kernel_for(Level level) {
  if (dot_kernels_for(level) == nullptr) return nullptr;  // the same features as the dot products
  return level == Level::avx512 ? &avx512_gemm_kernel() : &avx2_gemm_kernel();
}

const GemmKernel& gemm_kernel() {
  static const GemmKernel* const best = [] {
    const GemmKernel* k = std::strcmp(dot_kernels().name, "avx512") == 0 ? gemm_kernel_for(Level::avx512) : nullptr;
    return k != nullptr ? k : &avx2_gemm_kernel();
  }();
  return *best;
}

// Measured with `weft bench gemm -t 1` (its crossover table) on an AVX-512
// machine: the packed product pays for converting and transposing all of A
// once, about as much as 16-64 activation rows of multiply-adds; the tile
// engine's cost per row rises as K shrinks (a horizontal sum per output) and
// when the rows of a large batch no longer stay in cache. f16 and bf16
// weights cost the tile engine a conversion per use, f32 weights none.
//   K = 2048: f16, bf16 even at ~32-48 rows, f32 at ~64-96
//   K = 512 (attention values): ~16-32;  K = 128 (attention scores): ~8
bool gemm_preferred(DType a_type, int64_t m, int64_t k, int64_t n) {
  if (a_type != DType::f32 && a_type != DType::f16 && a_type != DType::bf16) return false;
  if (k < 1 || m < 1) return false;
  const bool f32 = a_type == DType::f32;
  const int64_t min_n = k <= 256 ? 8 : k <= 1024 ? (f32 ? 32 : 16) : (f32 ? 64 : 32);
  return n >= min_n;
}

GemmBlocking gemm_blocking(const GemmKernel& kernel, const GemmShape& s) {
  GemmBlocking b;
  b.kc = std::clamp<int64_t>(s.k, 1, kKc);
  b.mc = std::min(round_up(std::max<int64_t>(s.m, 1), kernel.mr), kMc / kernel.mr * kernel.mr);
  b.nc = std::min(round_up(std::max<int64_t>(s.max_cols, 1), kernel.nr), kNc / kernel.nr * kernel.nr);
  return b;
}

size_t gemm_scratch_bytes(const GemmShape& s) {
  const GemmBlocking b = gemm_blocking(gemm_kernel(), s);
  return kScratchAlign + scratch_piece_bytes(b.mc * b.kc, sizeof(float)) +
         scratch_piece_bytes(b.kc * b.nc, sizeof(float));
}

void gemm_with(const KernelContext& kc, const GemmKernel& kern, const GemmBlocking& blk, const GemmShape& s,
               const GemmOperands& ops, float* a_buf, float* b_buf) {
  const int64_t nb = ops.batches();
  if (nb == 0 || s.m == 0) return;
  const GemmCut cut = gemm_cut(nb, s.m, s.max_cols, kc.nth, kern.mr, kern.nr);
  const int64_t per = cut.sm * cut.sn;
  const Range r = split_range(nb * per, kc.ith, kc.nth);
  for (int64_t w = r.begin; w < r.end; ++w) {
    Unit u;
    u.bi = w / per;
    const auto [m0, m1] = gemm_slab(s.m, cut.sm, (w % per) / cut.sn, kern.mr);
    const auto [n0, n1] = gemm_slab(ops.cols(u.bi), cut.sn, w % cut.sn, kern.nr);
    u.m0 = m0, u.m1 = m1, u.n0 = n0, u.n1 = n1;
    if (u.m0 < u.m1 && u.n0 < u.n1) run_unit(kc, kern, blk, s, ops, u, a_buf, b_buf);
    if (kc.cancelled()) return;
  }
}

void gemm(const KernelContext& kc, const GemmShape& s, const GemmOperands& ops, AlignedScratch& scratch) {
  const GemmKernel& kern = gemm_kernel();
  const GemmBlocking blk = gemm_blocking(kern, s);
  float* a_buf = scratch.take<float>(blk.mc * blk.kc);
  float* b_buf = scratch.take<float>(blk.kc * blk.nc);
  gemm_with(kc, kern, blk, s, ops, a_buf, b_buf);
}

}  // namespace weft::cpu
