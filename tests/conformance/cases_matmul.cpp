// Cases: mul_mat and mul_mat_id for every weight dtype, routed_rows; token generation
// (N = 1) and batches, broadcast over dims 2 and 3, non-contiguous operands.
// Quantized weights: see tol::kMatQuant for the tolerance and when a case
// takes exactly representable activations instead.
#include <span>

#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

// How the weights operand is laid out: rows stay packed (mul_mat needs it).
enum class WLayout { packed, strided, permuted };

struct MatCase {
  Shape a, b;
  Layout lb = Layout::packed;
  WLayout la = WLayout::packed;
};
// Every weight dtype (quantized ones where K is a whole number of blocks).
const MatCase kMatCases[] = {
    {{64, 17, 1, 1}, {64, 1, 1, 1}},
    {{64, 17, 2, 1}, {64, 5, 6, 1}},
    {{128, 33, 1, 1}, {128, 7, 1, 1}},
    {{96, 5, 1, 2}, {96, 3, 2, 4}},
    {{256, 16, 1, 1}, {256, 1, 1, 1}},
    {{32, 1, 1, 1}, {32, 1, 1, 1}},
    {{1024, 8, 1, 1}, {1024, 3, 1, 1}},
    {{64, 9, 1, 1}, {64, 4, 1, 1}, Layout::transposed},
    {{64, 6, 2, 1}, {64, 3, 2, 1}, Layout::permuted},
    {{96, 7, 1, 1}, {96, 5, 1, 1}, Layout::strided},
    {{64, 6, 1, 1}, {64, 3, 1, 1}, Layout::packed, WLayout::strided},
    {{64, 4, 3, 1}, {64, 2, 3, 1}, Layout::packed, WLayout::permuted},
    // Around the kernel's tiling: row/column remainders, column splits,
    // weights bigger than one cache block, a gathered (non-contiguous) b.
    {{256, 67, 1, 1}, {256, 19, 1, 1}},
    {{64, 4, 1, 1}, {64, 67, 1, 1}},
    {{4096, 72, 1, 1}, {4096, 9, 1, 1}},
    {{512, 33, 1, 1}, {512, 10, 1, 1}, Layout::transposed},
    {{1000, 9, 1, 1}, {1000, 5, 1, 1}},
    {{7, 3, 1, 1}, {7, 2, 1, 1}},
    {{33, 5, 2, 1}, {33, 4, 2, 1}},
};
// Float weights only, batches that take the packed product (gemm.h on the
// CPU): K past one block of 256 and not a multiple of 8, M and N around the
// register tiles (16/32 rows, 6/12 columns) and the row block (256),
// several column blocks (1020), broadcast over dims 2 and 3 (grouped-query
// attention), every layout of both operands, and a long K.
const MatCase kGemmCases[] = {
    {{300, 37, 1, 1}, {300, 75, 1, 1}},
    {{41, 300, 1, 1}, {41, 1030, 1, 1}},
    {{128, 40, 2, 1}, {128, 19, 8, 1}},
    {{64, 33, 2, 2}, {64, 12, 4, 6}},
    {{200, 29, 1, 1}, {200, 70, 1, 1}, Layout::strided},
    {{96, 70, 1, 1}, {96, 45, 1, 1}, Layout::transposed},
    {{64, 21, 3, 1}, {64, 17, 3, 1}, Layout::permuted},
    {{80, 35, 1, 1}, {80, 24, 1, 1}, Layout::packed, WLayout::strided},
    {{64, 34, 3, 1}, {64, 16, 3, 1}, Layout::packed, WLayout::permuted},
    {{1030, 7, 1, 1}, {1030, 66, 1, 1}},
    {{8192, 20, 1, 1}, {8192, 70, 1, 1}},  // one chain of 8192 FMAs per output
};
// Quantized weights only: rows of 256 k values (every block size) and of
// 32 k, odd row counts, matrix-vector products and a prompt-sized batch.
const MatCase kQuantMatCases[] = {
    {{256, 17, 1, 1}, {256, 1, 1, 1}},
    {{2304, 33, 1, 1}, {2304, 1, 1, 1}},
    {{512, 67, 1, 1}, {512, 65, 1, 1}},
    {{768, 19, 2, 1}, {768, 3, 4, 1}},
    {{256, 16, 1, 1}, {256, 4, 1, 1}, Layout::strided},
    {{256, 9, 1, 1}, {256, 5, 1, 1}, Layout::transposed},
    {{512, 6, 1, 1}, {512, 3, 1, 1}, Layout::packed, WLayout::strided},
    {{256, 5, 3, 1}, {256, 2, 3, 1}, Layout::packed, WLayout::permuted},
    {{160, 33, 1, 1}, {160, 2, 1, 1}},
    {{256, 10, 1, 1}, {256, 18, 1, 1}, Layout::strided},
    {{256, 9, 1, 1}, {256, 20, 1, 1}, Layout::transposed},
};
// Quantized weights with q8_act_grid() activations (b packed): no
// activation rounding, so the integer dot products are held to f32 accuracy.
const MatCase kQuantExactCases[] = {
    {{256, 7, 1, 1}, {256, 1, 1, 1}},    {{1024, 3, 1, 1}, {1024, 2, 1, 1}}, {{512, 67, 1, 1}, {512, 9, 1, 1}},
    {{2304, 19, 1, 1}, {2304, 1, 1, 1}}, {{96, 5, 1, 1}, {96, 3, 1, 1}},
    // Batches of 16 or more: the packed product of the 32-value types (qgemm.h).
    {{96, 13, 1, 1}, {96, 17, 1, 1}},    {{288, 21, 2, 1}, {288, 19, 4, 1}},
};

Tensor* weights(CaseBuilder& b, DType type, const Shape& ne, WLayout layout) {
  switch (layout) {
    case WLayout::packed: return b.input(type, ne);
    case WLayout::strided: return operand(b, type, ne, Layout::strided);
    case WLayout::permuted: {
      Tensor* leaf = b.input(type, {ne[0], ne[2], ne[1], ne[3]});
      return ops::permute(b.ctx(), leaf, 0, 2, 1, 3);
    }
  }
  return nullptr;
}

const char* wlayout_suffix(WLayout l) {
  return l == WLayout::strided ? " a=strided" : l == WLayout::permuted ? " a=permuted" : "";
}

// exact: b is q8_act_grid() (and must be packed), compared with kMatQuantExact.
void add_mat_case(std::vector<Case>& cases, DType w, const MatCase& c, bool exact) {
  std::string name = "mul_mat " + dtype_str(w) + " " + shape_str(c.a) + "x" + shape_str(c.b) + wlayout_suffix(c.la) +
                     layout_suffix(c.lb, "b") + (exact ? " b=q8grid" : "");
  cases.push_back({name, [w, c, exact](CaseBuilder& b) {
                     Tensor* a = weights(b, w, c.a, c.la);
                     Tensor* x = operand(b, DType::f32, c.b, c.lb, exact ? q8_act_grid() : Init{});
                     b.output(ops::mul_mat(b.ctx(), a, x), exact ? tol::kMatQuantExact : matmul_tol(w));
                   }});
}

void add_mul_mat(std::vector<Case>& cases) {
  for (DType w : kFloatTypes) {
    for (const MatCase& c : kMatCases) add_mat_case(cases, w, c, false);
    for (const MatCase& c : kGemmCases) add_mat_case(cases, w, c, false);
  }
  for (DType w : kQuantTypes) {
    const int64_t block = traits(w).block_size;
    for (const auto& list : {std::span<const MatCase>(kMatCases), std::span<const MatCase>(kQuantMatCases)}) {
      for (const MatCase& c : list) {
        if (c.a[0] % block != 0) continue;
        // Too few outputs for kMatQuant: exact activations instead.
        const bool few = c.a[1] * c.b[1] * c.b[2] * c.b[3] < tol::kMinRandomOutputs;
        if (few && c.lb != Layout::packed) continue;
        add_mat_case(cases, w, c, few);
      }
    }
    for (const MatCase& c : kQuantExactCases) {
      if (c.a[0] % block == 0) add_mat_case(cases, w, c, true);
    }
  }
}

struct MoeCase {
  int64_t k, m, n_expert, n_used, n_tokens;
  bool shared_b;  // n_b == 1 (every expert reads the same row of b)
  Layout lb = Layout::packed;
  bool exact = false;  // b is q8_act_grid() (quantized weights only)
  // > 0: as holds a slice of experts [id_base, id_base + n_expert) of
  // n_expert + id_base + 2, and ids name all of them (an expert split).
  int32_t id_base = 0;
};
const MoeCase kMoeCases[] = {
    {64, 16, 4, 2, 3, true},
    {64, 16, 4, 2, 3, false},
    {128, 7, 8, 3, 5, false},
    {64, 5, 3, 1, 1, true},
    {64, 8, 4, 2, 4, false, Layout::strided},
    {64, 16, 3, 2, 6, false, Layout::packed, false, 2},
    {64, 16, 2, 3, 5, true, Layout::packed, false, 1},
    // 16 or more pairs per expert: the 32-value types' packed product.
    {64, 12, 3, 2, 30, false},
    {64, 16, 3, 2, 24, false, Layout::packed, false, 2},
    {64, 8, 2, 2, 16, false, Layout::strided},
};
// Quantized weights only: rows of 256 k.
const MoeCase kQuantMoeCases[] = {
    {256, 16, 4, 2, 3, false},
    {512, 9, 8, 3, 5, false},
    {256, 17, 3, 1, 1, true},
    {256, 16, 4, 2, 4, false, Layout::strided},
    {256, 33, 4, 2, 2, true},
    {256, 5, 3, 1, 1, true, Layout::packed, true},
    {512, 8, 4, 2, 3, false, Layout::packed, true},
    {256, 9, 2, 2, 16, false, Layout::packed, true},
};

void add_moe_case(std::vector<Case>& cases, DType w, const MoeCase& c, bool exact) {
  const int64_t n_b = c.shared_b ? 1 : c.n_used;
  const Shape as_ne = {c.k, c.m, c.n_expert, 1}, b_ne = {c.k, n_b, c.n_tokens, 1};
  std::string name = "mul_mat_id " + dtype_str(w) + " " + shape_str(as_ne) + "x" + shape_str(b_ne) +
                     " n_used=" + std::to_string(c.n_used) + layout_suffix(c.lb, "b") + (exact ? " b=q8grid" : "") +
                     (c.id_base > 0 ? " id_base=" + std::to_string(c.id_base) : "");
  cases.push_back({name, [w, c, as_ne, b_ne, exact](CaseBuilder& b) {
                     Tensor* as = b.input(w, as_ne);
                     Tensor* x = operand(b, DType::f32, b_ne, c.lb, exact ? q8_act_grid() : Init{});
                     const int64_t n_ids = c.id_base > 0 ? c.n_expert + c.id_base + 2 : c.n_expert;
                     Tensor* ids = b.input(DType::i32, {c.n_used, c.n_tokens, 1, 1}, indices(n_ids));
                     b.output(ops::mul_mat_id(b.ctx(), as, x, ids, c.id_base),
                              exact ? tol::kMatQuantExact : matmul_tol(w));
                   }});
}

void add_mul_mat_id(std::vector<Case>& cases) {
  for (DType w : kFloatTypes) {
    for (const MoeCase& c : kMoeCases) add_moe_case(cases, w, c, false);
  }
  for (DType w : kQuantTypes) {
    const int64_t block = traits(w).block_size;
    for (const auto& list : {std::span<const MoeCase>(kMoeCases), std::span<const MoeCase>(kQuantMoeCases)}) {
      for (const MoeCase& c : list) {
        if (c.k % block != 0) continue;
        const bool few = c.m * c.n_used * c.n_tokens < tol::kMinRandomOutputs;
        if ((few || c.exact) && c.lb != Layout::packed) continue;
        add_moe_case(cases, w, c, few || c.exact);
      }
    }
  }
}

// The rows an expert slice [first, first + count) of n_ids experts reads:
// ids drawn over every expert, so some tokens route to the slice and some
// do not.
void add_routed_rows(std::vector<Case>& cases) {
  struct RoutedCase {
    int64_t k, n_used, n_tokens, n_ids;
    int32_t first, count;
  };
  const RoutedCase kCases[] = {
      {16, 2, 9, 8, 2, 3}, {64, 1, 5, 4, 0, 1}, {33, 3, 12, 16, 13, 3}, {8, 2, 1, 6, 0, 6}, {128, 2, 40, 8, 6, 2},
  };
  for (const RoutedCase& c : kCases) {
    std::string name = "routed_rows f32 [" + std::to_string(c.k) + "," + std::to_string(c.n_tokens) +
                       "] n_used=" + std::to_string(c.n_used) + " experts [" + std::to_string(c.first) + ",+" +
                       std::to_string(c.count) + ") of " + std::to_string(c.n_ids);
    cases.push_back({name, [c](CaseBuilder& b) {
                       Tensor* x = b.input(DType::f32, {c.k, c.n_tokens, 1, 1});
                       Tensor* ids = b.input(DType::i32, {c.n_used, c.n_tokens, 1, 1}, indices(c.n_ids));
                       b.output(ops::routed_rows(b.ctx(), x, ids, c.first, c.count), tol::kExact);
                     }});
  }
}

}  // namespace

void add_matmul_cases(std::vector<Case>& cases) {
  add_mul_mat(cases);
  add_mul_mat_id(cases);
  add_routed_rows(cases);
}

}  // namespace weft::conformance
