// Cases: ops along rows. rms_norm, norm, soft_max, sum_rows, argmax,
// argsort, top_k (all f32 inputs); rope and rope_ext in cases_rope.cpp.
#include <cstdio>

#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

struct RowShape {
  Shape ne;
  Layout layout = Layout::packed;
};

void add_norms(std::vector<Case>& cases) {
  struct NormCase {
    Shape ne;
    Layout layout;
    float eps;
  };
  const NormCase kShapes[] = {
      {{1, 3, 1, 1}, Layout::packed, 1e-6f},      {{7, 5, 1, 1}, Layout::packed, 1e-5f},
      {{33, 3, 2, 1}, Layout::packed, 1e-1f},     {{67, 2, 2, 2}, Layout::packed, 1e-5f},
      {{256, 4, 1, 1}, Layout::packed, 1e-6f},    {{4099, 2, 1, 1}, Layout::packed, 1e-5f},
      {{9, 13, 1, 1}, Layout::transposed, 1e-5f}, {{40, 6, 2, 1}, Layout::strided, 1e-5f},
  };
  for (const bool rms : {true, false}) {
    for (const NormCase& s : kShapes) {
      std::string name = std::string(rms ? "rms_norm" : "norm") + " f32 " + shape_str(s.ne) +
                         layout_suffix(s.layout, "a") + fmt(" eps=%g", s.eps);
      cases.push_back({name, [rms, s](CaseBuilder& b) {
                         Tensor* x = operand(b, DType::f32, s.ne, s.layout);
                         Tensor* y = rms ? ops::rms_norm(b.ctx(), x, s.eps) : ops::norm(b.ctx(), x, s.eps);
                         b.output(y, tol::kTranscend);
                       }});
    }
  }
}

void add_soft_max(std::vector<Case>& cases) {
  enum class Mask { none, causal, random };
  struct SoftMaxCase {
    Shape a;
    Layout layout;
    Mask mask;
    Shape mask_ne;
    DType mask_type;
    float scale;
    float range;  // inputs uniform in [-range, range]
  };
  const SoftMaxCase kCases[] = {
      {{7, 3, 1, 1}, Layout::packed, Mask::none, {}, DType::f32, 1.0f, 1.0f},
      {{1, 4, 1, 1}, Layout::packed, Mask::none, {}, DType::f32, 1.0f, 1.0f},
      {{33, 5, 2, 1}, Layout::packed, Mask::none, {}, DType::f32, 0.125f, 1.0f},
      {{67, 4, 3, 2}, Layout::packed, Mask::none, {}, DType::f32, 1.0f, 1.0f},
      {{10, 3, 1, 1}, Layout::packed, Mask::none, {}, DType::f32, 8.0f, 20.0f},  // needs the max subtracted
      {{12, 9, 1, 1}, Layout::transposed, Mask::none, {}, DType::f32, 1.0f, 1.0f},
      {{16, 16, 1, 1}, Layout::packed, Mask::causal, {16, 16, 1, 1}, DType::f32, 0.25f, 1.0f},
      {{32, 7, 4, 1}, Layout::packed, Mask::causal, {32, 8, 1, 1}, DType::f32, 0.5f, 1.0f},
      {{32, 7, 4, 1}, Layout::packed, Mask::causal, {32, 8, 1, 1}, DType::f16, 0.5f, 1.0f},
      {{24, 5, 2, 3}, Layout::packed, Mask::random, {24, 5, 2, 1}, DType::f32, 1.0f, 1.0f},
      {{24, 5, 4, 3}, Layout::packed, Mask::random, {24, 5, 2, 3}, DType::f16, 0.5f, 1.0f},
      {{20, 6, 2, 1}, Layout::strided, Mask::random, {20, 6, 1, 1}, DType::f32, 1.0f, 1.0f},
      {{129, 2, 1, 1}, Layout::packed, Mask::random, {129, 3, 1, 1}, DType::f16, 1.0f, 1.0f},
      {{1000, 4, 1, 1}, Layout::packed, Mask::causal, {1000, 4, 1, 1}, DType::f32, 0.1f, 1.0f},
  };
  for (const SoftMaxCase& c : kCases) {
    std::string name = "soft_max f32 " + shape_str(c.a) + layout_suffix(c.layout, "a");
    if (c.mask != Mask::none) {
      name +=
          std::string(c.mask == Mask::causal ? " causal " : " mask ") + dtype_str(c.mask_type) + shape_str(c.mask_ne);
    }
    name += fmt(" scale=%g", c.scale);
    cases.push_back({name, [c](CaseBuilder& b) {
                       Tensor* x = operand(b, DType::f32, c.a, c.layout, uniform(-c.range, c.range));
                       Tensor* m = nullptr;
                       if (c.mask != Mask::none) {
                         m = b.input(c.mask_type, c.mask_ne,
                                     c.mask == Mask::causal ? causal_mask(c.a[1]) : random_mask());
                       }
                       b.output(ops::soft_max(b.ctx(), x, m, c.scale), tol::kTranscend);
                     }});
  }
  // Attention sinks (gpt-oss): one logit per index of dim 2 joins each row's
  // denominator; from far below the row's logits (no effect) to far above
  // (near-zero rows), with masks (a dead row stays zeros).
  struct SinkCase {
    Shape a;
    Mask mask;
    float lo, hi;  // sinks uniform in [lo, hi]
  };
  const SinkCase kSinks[] = {
      {{9, 4, 3, 1}, Mask::none, -2.0f, 2.0f},
      {{16, 16, 4, 1}, Mask::causal, -1.0f, 3.0f},
      {{24, 5, 2, 3}, Mask::random, -4.0f, 4.0f},
      {{7, 3, 2, 1}, Mask::none, 30.0f, 40.0f},
  };
  for (const SinkCase& c : kSinks) {
    const std::string name = "soft_max f32 " + shape_str(c.a) + (c.mask == Mask::causal ? " causal" : c.mask == Mask::random ? " mask" : "") +
                             fmt(" sinks [%g,", c.lo) + fmt("%g]", c.hi);
    cases.push_back({name, [c](CaseBuilder& b) {
                       Tensor* x = b.input(DType::f32, c.a, uniform(-1.0f, 1.0f));
                       Tensor* m = nullptr;
                       if (c.mask != Mask::none)
                         m = b.input(DType::f32, {c.a[0], c.a[1], 1, 1}, c.mask == Mask::causal ? causal_mask(c.a[1]) : random_mask());
                       Tensor* sinks = b.input(DType::f32, {c.a[2], 1, 1, 1}, uniform(c.lo, c.hi));
                       b.output(ops::soft_max(b.ctx(), x, m, 0.5f, sinks), tol::kTranscend);
                     }});
  }
}

void add_reductions(std::vector<Case>& cases) {
  const RowShape kSum[] = {{{1, 1, 1, 1}},
                           {{7, 3, 1, 1}},
                           {{33, 5, 2, 3}},
                           {{256, 3, 1, 1}},
                           {{9, 13, 1, 1}, Layout::transposed},
                           {{20, 6, 2, 1}, Layout::strided}};
  for (const RowShape& s : kSum) {
    cases.push_back({"sum_rows f32 " + shape_str(s.ne) + layout_suffix(s.layout, "a"), [s](CaseBuilder& b) {
                       b.output(ops::sum_rows(b.ctx(), operand(b, DType::f32, s.ne, s.layout)), tol::kTranscend);
                     }});
  }
  const RowShape kArg[] = {{{1, 3, 1, 1}},
                           {{7, 5, 1, 1}},
                           {{33, 4, 2, 3}},
                           {{200, 3, 1, 1}},
                           {{9, 13, 1, 1}, Layout::transposed},
                           {{20, 6, 2, 1}, Layout::strided}};
  for (const RowShape& s : kArg) {
    cases.push_back({"argmax f32 " + shape_str(s.ne) + layout_suffix(s.layout, "a"), [s](CaseBuilder& b) {
                       b.output(ops::argmax(b.ctx(), operand(b, DType::f32, s.ne, s.layout, distinct())), 0.0);
                     }});
  }
  cases.push_back({"argmax f32 [16,8,1,1] ties", [](CaseBuilder& b) {
                     b.output(ops::argmax(b.ctx(), b.input(DType::f32, {16, 8, 1, 1}, coarse(0.5f))), 0.0);
                   }});
}

void add_sorts(std::vector<Case>& cases) {
  const RowShape kSort[] = {
      {{1, 2, 1, 1}}, {{7, 3, 1, 1}}, {{33, 4, 2, 1}}, {{100, 3, 1, 2}}, {{9, 13, 1, 1}, Layout::transposed}};
  for (const SortOrder order : {SortOrder::ascending, SortOrder::descending}) {
    const char* oname = order == SortOrder::ascending ? " asc" : " desc";
    for (const RowShape& s : kSort) {
      cases.push_back(
          {"argsort f32 " + shape_str(s.ne) + layout_suffix(s.layout, "a") + oname, [s, order](CaseBuilder& b) {
             Tensor* x = operand(b, DType::f32, s.ne, s.layout, distinct());
             b.output(ops::argsort(b.ctx(), x, order), 0.0);
           }});
    }
    // Ties keep the lower index first.
    cases.push_back({std::string("argsort f32 [16,5,1,1] ties") + oname, [order](CaseBuilder& b) {
                       b.output(ops::argsort(b.ctx(), b.input(DType::f32, {16, 5, 1, 1}, coarse(0.25f)), order), 0.0);
                     }});
  }
  struct TopK {
    Shape ne;
    Layout layout;
    int k;
  };
  const TopK kTopK[] = {{{7, 3, 1, 1}, Layout::packed, 1},      {{33, 4, 2, 1}, Layout::packed, 3},
                        {{64, 5, 1, 1}, Layout::packed, 64},    {{100, 2, 1, 2}, Layout::packed, 8},
                        {{20, 9, 1, 1}, Layout::transposed, 4}, {{1, 3, 1, 1}, Layout::packed, 1}};
  for (const TopK& t : kTopK) {
    cases.push_back({"top_k f32 " + shape_str(t.ne) + layout_suffix(t.layout, "a") + " k=" + std::to_string(t.k),
                     [t](CaseBuilder& b) {
                       Tensor* x = operand(b, DType::f32, t.ne, t.layout, distinct());
                       b.output(ops::top_k(b.ctx(), x, t.k), 0.0);
                     }});
  }
}

}  // namespace

void add_row_cases(std::vector<Case>& cases) {
  add_norms(cases);
  add_soft_max(cases);
  add_rope_cases(cases);
  add_reductions(cases);
  add_sorts(cases);
}

}  // namespace weft::conformance
