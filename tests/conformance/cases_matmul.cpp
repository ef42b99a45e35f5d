// Cases: mul_mat and mul_mat_id for every weight dtype; token generation
// (N = 1) and batches, broadcast over dims 2 and 3, non-contiguous operands.
#include "conformance/cases.h"
#include "weft/ops.h"

namespace weft::conformance {
namespace {

// How the weights operand is laid out: rows stay packed (mul_mat needs it).
enum class WLayout { packed, strided, permuted };

struct MatCase {
  Shape a, b;
  Layout lb = Layout::packed;
  WLayout la = WLayout::packed;
  bool quant_ok = true;  // K is a multiple of 32
};
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
    {{1000, 9, 1, 1}, {1000, 5, 1, 1}, Layout::packed, WLayout::packed, false},
    {{7, 3, 1, 1}, {7, 2, 1, 1}, Layout::packed, WLayout::packed, false},
    {{33, 5, 2, 1}, {33, 4, 2, 1}, Layout::packed, WLayout::packed, false},
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

void add_mul_mat(std::vector<Case>& cases) {
  for (DType w : kWeightTypes) {
    const bool quant = w == DType::q8_0 || w == DType::q4_0;
    for (const MatCase& c : kMatCases) {
      if (quant && !c.quant_ok) continue;
      std::string name = "mul_mat " + dtype_str(w) + " " + shape_str(c.a) + "x" + shape_str(c.b) +
                         wlayout_suffix(c.la) + layout_suffix(c.lb, "b");
      cases.push_back({name, [w, c](CaseBuilder& b) {
                         Tensor* a = weights(b, w, c.a, c.la);
                         Tensor* x = operand(b, DType::f32, c.b, c.lb);
                         b.output(ops::mul_mat(b.ctx(), a, x), matmul_tol(w));
                       }});
    }
  }
}

struct MoeCase {
  int64_t k, m, n_expert, n_used, n_tokens;
  bool shared_b;  // n_b == 1 (every expert reads the same row of b)
  Layout lb = Layout::packed;
};
const MoeCase kMoeCases[] = {
    {64, 16, 4, 2, 3, true},
    {64, 16, 4, 2, 3, false},
    {128, 7, 8, 3, 5, false},
    {64, 5, 3, 1, 1, true},
    {64, 8, 4, 2, 4, false, Layout::strided},
};

void add_mul_mat_id(std::vector<Case>& cases) {
  for (DType w : kWeightTypes) {
    for (const MoeCase& c : kMoeCases) {
      const int64_t n_b = c.shared_b ? 1 : c.n_used;
      const Shape as_ne = {c.k, c.m, c.n_expert, 1}, b_ne = {c.k, n_b, c.n_tokens, 1};
      std::string name = "mul_mat_id " + dtype_str(w) + " " + shape_str(as_ne) + "x" + shape_str(b_ne) +
                         " n_used=" + std::to_string(c.n_used) + layout_suffix(c.lb, "b");
      cases.push_back({name, [w, c, as_ne, b_ne](CaseBuilder& b) {
                         Tensor* as = b.input(w, as_ne);
                         Tensor* x = operand(b, DType::f32, b_ne, c.lb);
                         Tensor* ids = b.input(DType::i32, {c.n_used, c.n_tokens, 1, 1}, indices(c.n_expert));
                         b.output(ops::mul_mat_id(b.ctx(), as, x, ids), matmul_tol(w));
                       }});
    }
  }
}

}  // namespace

void add_matmul_cases(std::vector<Case>& cases) {
  add_mul_mat(cases);
  add_mul_mat_id(cases);
}

}  // namespace weft::conformance
