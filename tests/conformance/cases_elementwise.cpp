// Cases: elementwise binary (add sub mul div, with broadcasting), unary
// (scale sqr sqrt silu gelu gelu_erf sigmoid softcap) and swiglu, for f32 /
// f16 / bf16 operands.
#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

using BinaryFn = Tensor* (*)(Context&, Tensor*, Tensor*);

struct BinaryOp {
  const char* name;
  BinaryFn fn;
};
constexpr BinaryOp kBinaryOps[] = {{"add", ops::add}, {"sub", ops::sub}, {"mul", ops::mul}, {"div", ops::div}};

struct BinaryShape {
  Shape a, b;
  Layout la = Layout::packed, lb = Layout::packed;
};
const BinaryShape kBinaryShapes[] = {
    {{1, 1, 1, 1}, {1, 1, 1, 1}},
    {{7, 1, 1, 1}, {7, 1, 1, 1}},
    {{33, 5, 1, 1}, {33, 5, 1, 1}},
    {{67, 3, 2, 2}, {67, 1, 1, 1}},      // one row over everything
    {{16, 6, 4, 3}, {1, 6, 1, 3}},       // dims 0 and 2
    {{10, 5, 4, 3}, {10, 5, 2, 1}},      // dims 2 (repeating) and 3
    {{3, 7, 5, 2}, {3, 1, 5, 1}},        // dims 1 and 3
    {{33, 3, 2, 1}, {1, 1, 1, 1}},       // a scalar
    {{1027, 3, 1, 1}, {1027, 1, 1, 1}},  // long rows: vector loop and tail
    {{9, 5, 3, 1}, {9, 5, 3, 1}, Layout::transposed},
    {{12, 7, 3, 2}, {12, 1, 3, 1}, Layout::packed, Layout::permuted},
    {{20, 6, 2, 1}, {20, 6, 1, 1}, Layout::strided, Layout::strided},
};

void add_binary(std::vector<Case>& cases) {
  for (const BinaryOp& op : kBinaryOps) {
    const bool divides = std::string(op.name) == "div";
    for (DType type : kFloatTypes) {
      for (const BinaryShape& s : kBinaryShapes) {
        std::string name = std::string(op.name) + " " + dtype_str(type) + " " + shape_str(s.a) + "+" + shape_str(s.b) +
                           layout_suffix(s.la, "a") + layout_suffix(s.lb, "b");
        cases.push_back({name, [op, type, s, divides](CaseBuilder& b) {
                           Tensor* x = operand(b, type, s.a, s.la);
                           Tensor* y = operand(b, type, s.b, s.lb, divides ? signed_range(0.5f, 1.5f) : Init{});
                           b.output(op.fn(b.ctx(), x, y), tol_for(type, tol::kArith));
                         }});
      }
    }
  }
  // Mixed operand dtypes: the result takes a's dtype.
  const DType kMixed[][2] = {{DType::f32, DType::f16},
                             {DType::f32, DType::bf16},
                             {DType::f16, DType::f32},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::bf16}};
  const Shape sa = {33, 4, 2, 1}, sb = {33, 1, 2, 1};
  for (const BinaryOp& op : kBinaryOps) {
    for (const auto& m : kMixed) {
      const DType ta = m[0], tb = m[1];
      const bool divides = std::string(op.name) == "div";
      std::string name =
          std::string(op.name) + " " + dtype_str(ta) + "," + dtype_str(tb) + " " + shape_str(sa) + "+" + shape_str(sb);
      cases.push_back({name, [op, ta, tb, sa, sb, divides](CaseBuilder& b) {
                         Tensor* x = b.input(ta, sa);
                         Tensor* y = b.input(tb, sb, divides ? signed_range(0.5f, 1.5f) : Init{});
                         b.output(op.fn(b.ctx(), x, y), tol_for(ta, tol::kArith));
                       }});
    }
  }
}

enum class Unary { scale, scale_neg, sqr, sqrt, silu, gelu, gelu_erf, sigmoid, softcap, softcap_wide };
struct UnaryOp {
  const char* name;
  Unary kind;
};
constexpr UnaryOp kUnaryOps[] = {{"scale", Unary::scale},       {"sqr", Unary::sqr},
                                 {"sqrt", Unary::sqrt},         {"silu", Unary::silu},
                                 {"gelu", Unary::gelu},         {"scale", Unary::scale_neg},
                                 {"gelu_erf", Unary::gelu_erf}, {"sigmoid", Unary::sigmoid},
                                 {"softcap", Unary::softcap},   {"softcap", Unary::softcap_wide}};

struct UnaryShape {
  Shape ne;
  Layout layout = Layout::packed;
};
const UnaryShape kUnaryShapes[] = {
    {{7, 1, 1, 1}},
    {{67, 5, 3, 2}},
    {{1027, 3, 1, 1}},
    {{9, 13, 2, 1}, Layout::transposed},
    {{20, 6, 2, 1}, Layout::strided},
};

Tensor* apply_unary(Context& ctx, Unary kind, Tensor* x) {
  switch (kind) {
    case Unary::scale: return ops::scale(ctx, x, 0.37f);
    case Unary::scale_neg: return ops::scale(ctx, x, -2.0f);
    case Unary::sqr: return ops::sqr(ctx, x);
    case Unary::sqrt: return ops::sqrt(ctx, x);
    case Unary::silu: return ops::silu(ctx, x);
    case Unary::gelu: return ops::gelu(ctx, x);
    case Unary::gelu_erf: return ops::gelu_erf(ctx, x);
    case Unary::sigmoid: return ops::sigmoid(ctx, x);
    case Unary::softcap: return ops::softcap(ctx, x, 2.5f);        // well inside tanh's bend
    case Unary::softcap_wide: return ops::softcap(ctx, x, 30.0f);  // Gemma 2's logit cap, values past it
  }
  return nullptr;
}

void add_unary(std::vector<Case>& cases) {
  for (const UnaryOp& op : kUnaryOps) {
    for (DType type : kFloatTypes) {
      for (const UnaryShape& s : kUnaryShapes) {
        const bool wide = op.kind == Unary::softcap_wide;
        if ((op.kind == Unary::scale_neg || wide) && s.layout != Layout::packed) continue;
        std::string name =
            std::string(op.name) + " " + dtype_str(type) + " " + shape_str(s.ne) + layout_suffix(s.layout, "a");
        if (op.kind == Unary::scale) name += " s=0.37";
        if (op.kind == Unary::scale_neg) name += " s=-2";
        if (op.kind == Unary::softcap) name += " cap=2.5";
        if (wide) name += " cap=30 x<100";
        const bool transcendental = op.kind == Unary::silu || op.kind == Unary::gelu || op.kind == Unary::gelu_erf ||
                                    op.kind == Unary::sigmoid || op.kind == Unary::softcap || wide;
        Init init = op.kind == Unary::sqrt ? uniform(0.0f, 2.0f)
                    : wide                 ? uniform(-100.0f, 100.0f)
                    : transcendental       ? uniform(-4.0f, 4.0f)
                                           : Init{};
        cases.push_back({name, [op, type, s, transcendental, init](CaseBuilder& b) {
                           Tensor* x = operand(b, type, s.ne, s.layout, init);
                           const double t = transcendental ? tol::kTranscend : tol::kArith;
                           b.output(apply_unary(b.ctx(), op.kind, x), tol_for(type, t));
                         }});
      }
    }
  }
  // swiglu: silu(a) * b, same shapes; b may have another dtype.
  const UnaryShape kSwigluShapes[] = {{{11, 1, 1, 1}}, {{64, 5, 3, 1}}, {{24, 7, 2, 2}, Layout::permuted}};
  for (DType type : kFloatTypes) {
    for (const UnaryShape& s : kSwigluShapes) {
      std::string name = "swiglu " + dtype_str(type) + " " + shape_str(s.ne) + layout_suffix(s.layout, "a,b");
      cases.push_back({name, [type, s](CaseBuilder& b) {
                         Tensor* x = operand(b, type, s.ne, s.layout, uniform(-4.0f, 4.0f));
                         Tensor* y = operand(b, type, s.ne, s.layout);
                         b.output(ops::swiglu(b.ctx(), x, y), tol_for(type, tol::kTranscend));
                       }});
    }
  }
  // swiglu_oai (gpt-oss): gate and up over [-10, 10] so both clamps at
  // limit 7 act; other alpha and limit values; b of another dtype.
  for (DType type : kFloatTypes) {
    for (const UnaryShape& s : kSwigluShapes) {
      std::string name = "swiglu_oai " + dtype_str(type) + " " + shape_str(s.ne) + layout_suffix(s.layout, "a,b");
      cases.push_back({name, [type, s](CaseBuilder& b) {
                         Tensor* x = operand(b, type, s.ne, s.layout, uniform(-10.0f, 10.0f));
                         Tensor* y = operand(b, type, s.ne, s.layout, uniform(-10.0f, 10.0f));
                         b.output(ops::swiglu_oai(b.ctx(), x, y, 1.702f, 7.0f), tol_for(type, tol::kTranscend));
                       }});
    }
  }
  cases.push_back({"swiglu_oai f32,f16 [40,3,1,1] alpha=0.5 limit=2", [](CaseBuilder& b) {
                     Tensor* x = b.input(DType::f32, {40, 3, 1, 1}, uniform(-4.0f, 4.0f));
                     Tensor* y = b.input(DType::f16, {40, 3, 1, 1}, uniform(-4.0f, 4.0f));
                     b.output(ops::swiglu_oai(b.ctx(), x, y, 0.5f, 2.0f), tol::kTranscend);
                   }});
  cases.push_back({"swiglu f32,f16 [40,3,1,1]", [](CaseBuilder& b) {
                     Tensor* x = b.input(DType::f32, {40, 3, 1, 1}, uniform(-4.0f, 4.0f));
                     Tensor* y = b.input(DType::f16, {40, 3, 1, 1});
                     b.output(ops::swiglu(b.ctx(), x, y), tol::kTranscend);
                   }});
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& cases) {
  add_binary(cases);
  add_unary(cases);
}

}  // namespace weft::conformance
