// Cases: rope, and rope_ext with frequency factors (Llama 3.1, Phi-3 long
// context), position interpolation (freq_scale) and attn_factor, on packed
// and non-contiguous operands (a view of some heads of a fused projection,
// a permuted tensor; the factors a contiguous view inside a bigger leaf).
#include <cstdio>

#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

enum class Src { packed, heads_view, permuted };

// a [head_dim, n_head, n_tokens, 1] laid out as src says.
Tensor* rope_operand(CaseBuilder& b, const Shape& ne, Src src) {
  const int64_t hd = ne[0], nh = ne[1], nt = ne[2];
  if (src == Src::packed) return b.input(DType::f32, ne);
  if (src == Src::heads_view) {
    // Heads 2..2+nh of a fused [hd, nh + 3, nt] tensor (as q out of a qkv projection).
    Tensor* big = b.input(DType::f32, {hd, nh + 3, nt, 1});
    return ops::view_3d(b.ctx(), big, hd, nh, nt, big->nb[1], big->nb[2], 2 * big->nb[1]);
  }
  Tensor* leaf = b.input(DType::f32, {hd, nt, nh, 1});
  return ops::permute(b.ctx(), leaf, 0, 2, 1, 3);
}

std::string src_suffix(Src src) {
  return src == Src::heads_view ? " a=heads_view" : src == Src::permuted ? " a=permuted" : "";
}

void add_rope(std::vector<Case>& cases) {
  struct RopeCase {
    Shape a;  // [head_dim, n_head, n_tokens, 1]
    int n_dims;
    float base;
    Src src;
    int64_t max_pos;
    double tol;
  };
  const RopeCase kCases[] = {
      {{64, 4, 5, 1}, 64, 10000.0f, Src::packed, 128, tol::kRope},
      {{128, 2, 3, 1}, 128, 1e6f, Src::packed, 128, tol::kRope},
      {{64, 3, 4, 1}, 32, 10000.0f, Src::packed, 128, tol::kRope},
      {{8, 2, 7, 1}, 6, 500000.0f, Src::packed, 128, tol::kRope},
      {{2, 1, 1, 1}, 2, 10000.0f, Src::packed, 128, tol::kRope},
      {{128, 16, 7, 1}, 96, 10000.0f, Src::packed, 128, tol::kRope},
      {{64, 3, 5, 1}, 64, 10000.0f, Src::heads_view, 128, tol::kRope},
      {{32, 3, 5, 1}, 16, 1e6f, Src::permuted, 128, tol::kRope},
      {{32, 2, 3, 1}, 32, 10000.0f, Src::packed, 4096, 1e-6},  // f32 angles lose digits at large p
  };
  for (const RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    for (const RopeCase& c : kCases) {
      std::string name = std::string("rope f32 ") + shape_str(c.a) + (mode == RopeMode::neox ? " neox" : " normal") +
                         " n_dims=" + std::to_string(c.n_dims) + fmt(" base=%g", c.base) + src_suffix(c.src);
      if (c.max_pos != 128) name += " pos<" + std::to_string(c.max_pos);
      cases.push_back({name, [c, mode](CaseBuilder& b) {
                         Tensor* x = rope_operand(b, c.a, c.src);
                         Tensor* pos = b.input(DType::i32, {c.a[2], 1, 1, 1}, indices(c.max_pos));
                         b.output(ops::rope(b.ctx(), x, pos, c.n_dims, mode, c.base), c.tol);
                       }});
    }
  }
}

void add_rope_ext(std::vector<Case>& cases) {
  enum class Factors { none, leaf, view };  // view: a contiguous view inside a bigger leaf
  struct ExtCase {
    Shape a;
    int n_dims;
    float base;
    Src src;
    Factors factors;
    float lo, hi;  // factors uniform in [lo, hi]
    ops::RopeScaling scaling;
    int64_t max_pos;
    double tol;
  };
  const ExtCase kCases[] = {
      // Defaults: rope itself.
      {{64, 4, 5, 1}, 64, 10000.0f, Src::packed, Factors::none, 0, 0, {}, 128, tol::kRope},
      // Llama 3.1: factors from 1 (high frequencies) to 8 (low), base 500000.
      {{64, 4, 5, 1}, 64, 500000.0f, Src::packed, Factors::leaf, 1.0f, 8.0f, {}, 128, tol::kRope},
      {{128, 3, 6, 1}, 128, 500000.0f, Src::heads_view, Factors::leaf, 1.0f, 8.0f, {}, 128, tol::kRope},
      // Phi-3 long context: large factors and an attention factor; partial rotation.
      {{96, 2, 4, 1}, 64, 10000.0f, Src::packed, Factors::leaf, 1.0f, 60.0f, {1.0f, 1.19f}, 128, tol::kRope},
      {{48, 3, 5, 1}, 32, 10000.0f, Src::permuted, Factors::view, 0.5f, 4.0f, {1.0f, 0.8f}, 128, tol::kRope},
      // Linear position interpolation, without factors and with them.
      {{64, 2, 5, 1}, 64, 10000.0f, Src::packed, Factors::none, 0, 0, {0.25f, 1.0f}, 128, tol::kRope},
      {{32, 3, 4, 1}, 16, 1e6f, Src::heads_view, Factors::none, 0, 0, {0.125f, 1.5f}, 128, tol::kRope},
      {{8, 2, 7, 1}, 6, 10000.0f, Src::packed, Factors::view, 1.0f, 3.0f, {0.5f, 2.0f}, 128, tol::kRope},
      {{2, 1, 1, 1}, 2, 10000.0f, Src::packed, Factors::leaf, 0.5f, 2.0f, {2.0f, 1.0f}, 128, tol::kRope},
      // Long positions: f32 results of large angles lose digits, as for rope.
      {{32, 2, 3, 1}, 32, 500000.0f, Src::packed, Factors::leaf, 1.0f, 8.0f, {1.0f, 1.1f}, 65536, 1e-6},
  };
  for (const RopeMode mode : {RopeMode::normal, RopeMode::neox}) {
    for (const ExtCase& c : kCases) {
      std::string name = std::string("rope_ext f32 ") + shape_str(c.a) +
                         (mode == RopeMode::neox ? " neox" : " normal") + " n_dims=" + std::to_string(c.n_dims) +
                         fmt(" base=%g", c.base) + src_suffix(c.src);
      if (c.factors != Factors::none) {
        name += fmt(" ff=[%g,", c.lo) + fmt("%g]", c.hi) + (c.factors == Factors::view ? " ff=view" : "");
      }
      name += fmt(" scale=%g", c.scaling.freq_scale) + fmt(" attn=%g", c.scaling.attn_factor);
      if (c.max_pos != 128) name += " pos<" + std::to_string(c.max_pos);
      cases.push_back({name, [c, mode](CaseBuilder& b) {
                         Tensor* x = rope_operand(b, c.a, c.src);
                         Tensor* pos = b.input(DType::i32, {c.a[2], 1, 1, 1}, indices(c.max_pos));
                         const int64_t half = c.n_dims / 2;
                         Tensor* ff = nullptr;
                         if (c.factors == Factors::leaf) {
                           ff = b.input(DType::f32, {half, 1, 1, 1}, uniform(c.lo, c.hi));
                         } else if (c.factors == Factors::view) {
                           Tensor* big = b.input(DType::f32, {half + 5, 1, 1, 1}, uniform(c.lo, c.hi));
                           ff = ops::view_1d(b.ctx(), big, half, 3 * sizeof(float));
                         }
                         b.output(ops::rope_ext(b.ctx(), x, pos, ff, c.n_dims, mode, c.base, c.scaling), c.tol);
                       }});
    }
  }
}

}  // namespace

void add_rope_cases(std::vector<Case>& cases) {
  add_rope(cases);
  add_rope_ext(cases);
}

}  // namespace weft::conformance
