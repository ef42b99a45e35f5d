// The graph half of weft_fuzz_worker (fuzz_structured.cpp has the driver):
//
// build_random_graph: a valid random graph in a conformance CaseBuilder:
//   one to three ops with random shapes, dtypes and operand layouts (packed,
//   transposed, permuted, strided views), sometimes followed by a few cheap
//   ops on the result. Each compared tensor carries the conformance
//   tolerance of what produced it (cases.h), so the driver can hold the
//   worker's output to the float64 reference. The op constructors still
//   check everything: a combination they refuse throws Error and the recipe
//   is drawn again.
//
// mutate_graph: an encoded graph (docs/rpc-protocol.md section 4) with 1-3
//   fields changed (dtype, op, flags, ne, nb, op params, src, view_src,
//   view_offs, buffer, offset, the node list, n_tensors) or its bytes cut,
//   extended or flipped. The result may still be valid: the worker must
//   then run it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "protocol/wire.h"
#include "weft/error.h"
#include "weft/ops.h"

namespace weft::rpc::fuzz {

using conformance::CaseBuilder;
using conformance::dtype_str;
using conformance::Init;
using conformance::Layout;
using conformance::Rng;
using conformance::Shape;
using conformance::shape_str;
namespace tol = conformance::tol;

namespace {

int64_t pick(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool chance(Rng& rng, double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}
template <class T, size_t N>
T one_of(Rng& rng, const T (&v)[N]) {
  return v[static_cast<size_t>(pick(rng, 0, N - 1))];
}
bool is_quant(DType t) {
  return t == DType::q8_0 || t == DType::q4_0;
}

constexpr DType kFloat[] = {DType::f32, DType::f16, DType::bf16};
constexpr DType kPlain[] = {DType::f32, DType::f16, DType::bf16, DType::i32};
constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::q8_0, DType::q4_0};

// Sizes: mostly small, sometimes 1, sometimes up to max (vector loops and tails).
int64_t size(Rng& rng, int64_t max) {
  if (chance(rng, 0.2)) return 1;
  if (chance(rng, 0.6)) return pick(rng, 1, std::min<int64_t>(max, 9));
  return pick(rng, 1, max);
}
// A row length: a whole number of blocks for a quantized type.
int64_t row(Rng& rng, DType t, int64_t max) {
  return is_quant(t) ? 32 * pick(rng, 1, std::max<int64_t>(1, max / 32)) : size(rng, max);
}
// A random shape; zero_ok: one dim may be 0 (8% of the time).
Shape shape(Rng& rng, int64_t max0, bool zero_ok, DType t = DType::f32) {
  Shape s = {row(rng, t, max0), size(rng, 6), chance(rng, 0.6) ? 1 : pick(rng, 1, 3), chance(rng, 0.8) ? 1 : 2};
  if (zero_ok && chance(rng, 0.08)) s[static_cast<size_t>(pick(rng, 0, 3))] = 0;
  return s;
}
// A size that divides n (n == 0: anything divides it).
int64_t divisor(Rng& rng, int64_t n) {
  if (n == 0) return pick(rng, 1, 3);
  if (chance(rng, 0.4)) return n;
  if (chance(rng, 0.5)) return 1;
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k) {
    if (n % k == 0) d.push_back(k);
  }
  return d[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(d.size()) - 1))];
}
Layout layout(Rng& rng, DType t) {
  const int r = static_cast<int>(pick(rng, 0, 9));
  if (r < 5) return Layout::packed;
  if (r < 7) return is_quant(t) ? Layout::strided : Layout::transposed;
  if (r < 9) return Layout::permuted;
  return Layout::strided;
}
std::string lay(Layout l, const char* which) {
  return conformance::layout_suffix(l, which);
}
Init data_init(DType t) {
  return t == DType::i32 ? conformance::indices(1 << 20) : Init{};
}

// What a recipe produced: root is computed, dest compared (root writes
// into dest for set_rows and cpy), with the tolerance of cases.h.
struct Out {
  Tensor* root = nullptr;
  Tensor* dest = nullptr;
  double tol = 0.0;
};

Out binary(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  using Fn = Tensor* (*)(Context&, Tensor*, Tensor*);
  struct Op {
    const char* name;
    Fn fn;
  };
  constexpr Op kOps[] = {{"add", ops::add}, {"sub", ops::sub}, {"mul", ops::mul}, {"div", ops::div}};
  const Op op = one_of(rng, kOps);
  const DType ta = one_of(rng, kFloat), tb = chance(rng, 0.7) ? ta : one_of(rng, kFloat);
  const Shape sa = shape(rng, max0, true);
  Shape sb;
  for (size_t i = 0; i < 4; ++i) sb[i] = divisor(rng, sa[i]);
  const Layout la = layout(rng, ta), lb = layout(rng, tb);
  const bool divides = op.fn == ops::div;
  d += std::string(op.name) + " " + dtype_str(ta) + "," + dtype_str(tb) + " " + shape_str(sa) + "+" + shape_str(sb) +
       lay(la, "a") + lay(lb, "b");
  Tensor* x = conformance::operand(b, ta, sa, la);
  Tensor* y = conformance::operand(b, tb, sb, lb, divides ? conformance::signed_range(0.5f, 1.5f) : Init{});
  Tensor* r = op.fn(b.ctx(), x, y);
  return {r, r, conformance::tol_for(ta, tol::kArith)};
}

Out unary(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  const DType t = one_of(rng, kFloat);
  const Shape s = shape(rng, max0, true);
  const Layout l = layout(rng, t);
  Context& ctx = b.ctx();
  const int k = static_cast<int>(pick(rng, 0, 5));
  constexpr const char* kNames[] = {"scale", "sqr", "sqrt", "silu", "gelu", "swiglu"};
  constexpr float kScales[] = {0.37f, -2.0f, 0.0f, 1e-3f, 16.0f};
  float sc = one_of(rng, kScales);
  if (t == DType::f16 && sc == 1e-3f) sc = 0.37f;  // f16 results that small go subnormal: not the tolerance's model
  d += std::string(kNames[k]) + " " + dtype_str(t) + " " + shape_str(s) + lay(l, "a");
  if (k == 0) d += " s=" + std::to_string(sc);
  Init init = k == 2 ? conformance::uniform(0.0f, 2.0f) : k >= 3 ? conformance::uniform(-4.0f, 4.0f) : Init{};
  Tensor* x = conformance::operand(b, t, s, l, init);
  Tensor* r = nullptr;
  switch (k) {
    case 0: r = ops::scale(ctx, x, sc); break;
    case 1: r = ops::sqr(ctx, x); break;
    case 2: r = ops::sqrt(ctx, x); break;
    case 3: r = ops::silu(ctx, x); break;
    case 4: r = ops::gelu(ctx, x); break;
    default: {
      const DType tb = chance(rng, 0.7) ? t : one_of(rng, kFloat);
      d += " b=" + dtype_str(tb);
      r = ops::swiglu(ctx, x, conformance::operand(b, tb, s, l));
    }
  }
  return {r, r, conformance::tol_for(t, k >= 2 ? tol::kTranscend : tol::kArith)};
}

// rms_norm, norm, sum_rows, argmax, argsort, top_k, soft_max: f32 rows.
Out rows(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  Context& ctx = b.ctx();
  const Shape s = shape(rng, max0, false);
  const Layout l = layout(rng, DType::f32);
  const int k = static_cast<int>(pick(rng, 0, 6));
  constexpr const char* kNames[] = {"rms_norm", "norm", "sum_rows", "argmax", "argsort", "top_k", "soft_max"};
  d += std::string(kNames[k]) + " f32 " + shape_str(s) + lay(l, "a");
  const bool sorts = k >= 3 && k <= 5;
  Tensor* x = conformance::operand(b, DType::f32, s, l, sorts ? conformance::distinct() : Init{});
  constexpr float kEps[] = {1e-6f, 1e-5f, 1e-1f};
  switch (k) {
    case 0: return {ops::rms_norm(ctx, x, one_of(rng, kEps)), nullptr, tol::kTranscend};
    case 1: return {ops::norm(ctx, x, one_of(rng, kEps)), nullptr, tol::kTranscend};
    case 2: return {ops::sum_rows(ctx, x), nullptr, tol::kTranscend};
    case 3: return {ops::argmax(ctx, x), nullptr, 0.0};
    case 4: {
      const auto order = chance(rng, 0.5) ? SortOrder::ascending : SortOrder::descending;
      return {ops::argsort(ctx, x, order), nullptr, 0.0};
    }
    case 5: {
      const int top = static_cast<int>(pick(rng, 1, s[0]));
      d += " k=" + std::to_string(top);
      return {ops::top_k(ctx, x, top), nullptr, 0.0};
    }
    default: break;
  }
  // soft_max: x was uniform [-1, 1]; the mask (if any) covers at least x's rows.
  constexpr float kScale[] = {1.0f, 0.125f, 8.0f};
  const float sc = one_of(rng, kScale);
  Tensor* mask = nullptr;
  if (chance(rng, 0.6)) {
    const DType mt = chance(rng, 0.5) ? DType::f32 : DType::f16;
    const Shape ms = {s[0], s[1] + pick(rng, 0, 2), divisor(rng, s[2]), divisor(rng, s[3])};
    const bool causal = s[0] >= s[1] && chance(rng, 0.5);  // else a row would see nothing
    d += std::string(causal ? " causal " : " mask ") + dtype_str(mt) + shape_str(ms);
    mask = b.input(mt, ms, causal ? conformance::causal_mask(s[1]) : conformance::random_mask());
  }
  d += " scale=" + std::to_string(sc);
  return {ops::soft_max(ctx, x, mask, sc), nullptr, tol::kTranscend};
}

Out rope(CaseBuilder& b, Rng& rng, std::string& d) {
  Context& ctx = b.ctx();
  const int64_t hd = 2 * pick(rng, 1, 32), nh = pick(rng, 1, 4), nt = pick(rng, 1, 6);
  const int n_dims = static_cast<int>(2 * pick(rng, 1, hd / 2));
  const RopeMode mode = chance(rng, 0.5) ? RopeMode::normal : RopeMode::neox;
  constexpr float kBase[] = {10000.0f, 1e6f, 500000.0f};
  const float base = one_of(rng, kBase);
  const int src = static_cast<int>(pick(rng, 0, 2));
  d += "rope f32 " + shape_str({hd, nh, nt, 1}) + " n_dims=" + std::to_string(n_dims) +
       (mode == RopeMode::neox ? " neox" : " normal") +
       (src == 1   ? " a=heads_view"
        : src == 2 ? " a=permuted"
                   : "");
  Tensor* x = nullptr;
  if (src == 0) {
    x = b.input(DType::f32, {hd, nh, nt, 1});
  } else if (src == 1) {
    Tensor* big = b.input(DType::f32, {hd, nh + 3, nt, 1});
    x = ops::view_3d(ctx, big, hd, nh, nt, big->nb[1], big->nb[2], 2 * big->nb[1]);
  } else {
    x = ops::permute(ctx, b.input(DType::f32, {hd, nt, nh, 1}), 0, 2, 1, 3);
  }
  Tensor* pos = b.input(DType::i32, {nt, 1, 1, 1}, conformance::indices(128));
  return {ops::rope(ctx, x, pos, n_dims, mode, base), nullptr, tol::kRope};
}

Out mul_mat(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  Context& ctx = b.ctx();
  const DType w = one_of(rng, conformance::kWeightTypes);
  const int64_t k = row(rng, w, std::max<int64_t>(max0, 64));
  if (chance(rng, 0.25)) {  // mul_mat_id
    const int64_t n_exp = pick(rng, 1, 4), n_used = pick(rng, 1, n_exp), n_tok = pick(rng, 1, 4);
    const int64_t n_b = chance(rng, 0.5) ? 1 : n_used, m = size(rng, 24);
    const Shape bs = {k, n_b, n_tok, 1};
    const Layout lb = chance(rng, 0.7) ? Layout::packed : Layout::strided;
    d += "mul_mat_id " + dtype_str(w) + " " + shape_str({k, m, n_exp, 1}) + "x" + shape_str(bs) +
         " n_used=" + std::to_string(n_used) + lay(lb, "b");
    Tensor* as = b.input(w, {k, m, n_exp, 1});
    Tensor* x = conformance::operand(b, DType::f32, bs, lb);
    Tensor* ids = b.input(DType::i32, {n_used, n_tok, 1, 1}, conformance::indices(n_exp));
    return {ops::mul_mat_id(ctx, as, x, ids), nullptr, conformance::matmul_tol(w)};
  }
  const int64_t a2 = chance(rng, 0.7) ? 1 : 2, a3 = chance(rng, 0.8) ? 1 : 2;
  const Shape as = {k, size(rng, 40), a2, a3};
  const Shape bs = {k, chance(rng, 0.1) ? pick(rng, 30, 70) : size(rng, 12), a2 * pick(rng, 1, 2),
                    a3 * pick(rng, 1, 2)};
  const int wl = static_cast<int>(pick(rng, 0, 3));  // 0-1 packed, 2 strided, 3 permuted (rows stay packed)
  const Layout lb = layout(rng, DType::f32);
  d += "mul_mat " + dtype_str(w) + " " + shape_str(as) + "x" + shape_str(bs) +
       (wl == 2   ? " a=strided"
        : wl == 3 ? " a=permuted"
                  : "") +
       lay(lb, "b");
  Tensor* a = nullptr;
  if (wl == 2) {
    a = conformance::operand(b, w, as, Layout::strided);
  } else if (wl == 3) {
    a = ops::permute(ctx, b.input(w, {as[0], as[2], as[1], as[3]}), 0, 2, 1, 3);
  } else {
    a = b.input(w, as);
  }
  Tensor* x = conformance::operand(b, DType::f32, bs, lb);
  return {ops::mul_mat(ctx, a, x), nullptr, conformance::matmul_tol(w)};
}

Out data(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  Context& ctx = b.ctx();
  const int k = static_cast<int>(pick(rng, 0, 4));
  if (k == 0) {  // get_rows
    const DType t = one_of(rng, kAll);
    const Shape as = {row(rng, t, max0), pick(rng, 1, 12), pick(rng, 1, 3), 1};
    const int64_t n = pick(rng, 1, 8);
    const Layout l = chance(rng, 0.7) ? Layout::packed : Layout::strided;
    d += "get_rows " + dtype_str(t) + " " + shape_str(as) + "[" + std::to_string(n) + "]" + lay(l, "a");
    Tensor* a = conformance::operand(b, t, as, l, data_init(t));
    Tensor* idx = b.input(DType::i32, {n, as[2], 1, 1}, conformance::indices(as[1]));
    return {ops::get_rows(ctx, a, idx), nullptr, tol::kExact};
  }
  if (k == 1) {  // set_rows into any weight dtype
    const DType t = one_of(rng, conformance::kWeightTypes);
    const Shape ds = {row(rng, t, max0), pick(rng, 1, 10), pick(rng, 1, 3), 1};
    const Shape ss = {ds[0], pick(rng, 1, ds[1]), ds[2], 1};
    const Layout l = chance(rng, 0.6) ? Layout::packed : chance(rng, 0.5) ? Layout::transposed : Layout::permuted;
    d += "set_rows " + dtype_str(t) + " " + shape_str(ds) + "<-" + shape_str(ss) + lay(l, "src");
    Tensor* dst = b.input(t, ds);
    Tensor* src = conformance::operand(b, DType::f32, ss, l);
    Tensor* idx = b.input(DType::i32, {ss[1], ss[2], 1, 1}, conformance::distinct_indices(ds[1]));
    return {ops::set_rows(ctx, dst, src, idx), dst, conformance::storage_tol(t)};
  }
  if (k == 2) {  // cpy between dtypes: same shape, a reshape, a transposed source or a rows view
    constexpr DType kPairs[][2] = {{DType::f32, DType::f32},  {DType::f32, DType::f16},  {DType::f32, DType::bf16},
                                   {DType::f32, DType::q8_0}, {DType::f32, DType::q4_0}, {DType::f16, DType::f32},
                                   {DType::bf16, DType::f32}, {DType::f16, DType::bf16}, {DType::i32, DType::i32}};
    const auto& p = kPairs[pick(rng, 0, std::size(kPairs) - 1)];
    const DType ta = p[0], tb = p[1];
    Shape as = shape(rng, max0, false, tb);
    const int kind = is_quant(tb) ? static_cast<int>(pick(rng, 0, 1)) * 3 : static_cast<int>(pick(rng, 0, 3));
    if (kind == 3) as[2] = as[3] = 1;  // 2-d rows
    const double t = ta == tb || tb == DType::f32 ? tol::kExact : conformance::storage_tol(tb);
    Tensor* a = conformance::operand(b, ta, as, kind == 2 ? Layout::transposed : Layout::packed, data_init(ta));
    d += "cpy " + dtype_str(ta) + "->" + dtype_str(tb) + " " + shape_str(as);
    if (kind == 3) {  // rows [2, 2 + ne1) of a bigger destination
      Tensor* cache = b.input(tb, {as[0], as[1] + 3, 1, 1}, data_init(tb));
      d += " b=rows_view";
      Tensor* rows = ops::view_2d(ctx, cache, as[0], as[1], cache->nb[1], 2 * cache->nb[1]);
      return {ops::cpy(ctx, a, rows), cache, t};
    }
    const Shape bs = kind == 1 ? Shape{as[0] * as[1], as[2], as[3], 1} : as;
    d += "->" + shape_str(bs) + (kind == 2 ? " a=transposed" : "");
    Tensor* dst = b.input(tb, bs, data_init(tb));
    return {ops::cpy(ctx, a, dst), dst, t};
  }
  if (k == 3) {  // cont of a view
    const DType t = chance(rng, 0.2) ? (chance(rng, 0.5) ? DType::q8_0 : DType::q4_0) : one_of(rng, kPlain);
    const Shape s = shape(rng, max0, false, t);
    Layout l = is_quant(t) ? (chance(rng, 0.5) ? Layout::permuted : Layout::strided)
                           : (chance(rng, 0.34)  ? Layout::transposed
                              : chance(rng, 0.5) ? Layout::permuted
                                                 : Layout::strided);
    d += "cont " + dtype_str(t) + " " + shape_str(s) + lay(l, "a");
    return {ops::cont(ctx, conformance::operand(b, t, s, l, data_init(t))), nullptr, tol::kExact};
  }
  // concat
  const DType t = one_of(rng, kPlain);
  const int dim = static_cast<int>(pick(rng, 0, 3));
  const Shape as = shape(rng, max0, false);
  Shape bs = as;
  bs[static_cast<size_t>(dim)] = pick(rng, 1, 4);
  const Layout la = layout(rng, t), lb = layout(rng, t);
  d += "concat " + dtype_str(t) + " " + shape_str(as) + "," + shape_str(bs) + " dim=" + std::to_string(dim) +
       lay(la, "a") + lay(lb, "b");
  Tensor* x = conformance::operand(b, t, as, la, data_init(t));
  Tensor* y = conformance::operand(b, t, bs, lb, data_init(t));
  return {ops::concat(ctx, x, y, dim), nullptr, tol::kExact};
}

Out views(CaseBuilder& b, Rng& rng, std::string& d) {
  Context& ctx = b.ctx();
  const int64_t n0 = pick(rng, 2, 20), n1 = pick(rng, 2, 8), n2 = pick(rng, 1, 3);
  const int k = static_cast<int>(pick(rng, 0, 3));
  if (k == 0) {  // a view of a computed node is the output
    d += "view transpose(add) f32 " + shape_str({n0, n1, n2, 1});
    Tensor* s = ops::add(ctx, b.input(DType::f32, {n0, n1, n2, 1}), b.input(DType::f32, {n0, n1, n2, 1}));
    return {ops::transpose(ctx, s), nullptr, tol::kArith};
  }
  if (k == 1) {  // reshape, permute, cont
    const int64_t h = n0 * 2;
    d += "view reshape+permute f32 " + shape_str({h, n1, n2, 1});
    Tensor* r = ops::reshape(ctx, b.input(DType::f32, {h, n1, n2, 1}), {2, n0, n1, n2});
    return {ops::cont(ctx, ops::permute(ctx, r, 2, 0, 3, 1)), nullptr, tol::kExact};
  }
  if (k == 2) {  // view_2d of view_3d
    Tensor* big = b.input(DType::f32, {n0 + 2, n1 + 2, n2 + 1, 1});
    const int64_t o0 = pick(rng, 0, 2), o1 = pick(rng, 0, 2);
    d += "view view_2d(view_3d) f32 " + shape_str({n0 + 2, n1 + 2, n2 + 1, 1});
    Tensor* v3 =
        ops::view_3d(ctx, big, n0, n1, n2, big->nb[1], big->nb[2], static_cast<size_t>(o0 + o1 * (n0 + 2)) * 4);
    Tensor* v2 =
        ops::view_2d(ctx, v3, pick(rng, 1, n0), pick(rng, 1, n1), v3->nb[1], v3->nb[1] * static_cast<size_t>(o1));
    return {ops::cont(ctx, v2), nullptr, tol::kExact};
  }
  const DType t = one_of(rng, kFloat);  // scale of a view_1d of a reshape
  const int64_t n = n0 * n1, len = pick(rng, 1, n), off = pick(rng, 0, n - len);
  d += "view scale(view_1d(reshape)) " + dtype_str(t) + " " + shape_str({n0, n1, 1, 1}) + " [" + std::to_string(off) +
       ", +" + std::to_string(len) + ")";
  Tensor* r = ops::reshape(ctx, b.input(t, {n0, n1, 1, 1}), {n});
  const size_t unit = traits(t).unit_bytes;
  return {ops::scale(ctx, ops::view_1d(ctx, r, len, static_cast<size_t>(off) * unit), 2.0f), nullptr, tol::kExact};
}

// A cheap op on a float result: error grows by a bounded factor at most.
Out post(CaseBuilder& b, Rng& rng, const Out& in, std::string& d) {
  Context& ctx = b.ctx();
  Tensor* x = in.root;
  Tensor* r = nullptr;
  switch (pick(rng, 0, 5)) {
    case 0:
      d += " >scale";
      r = ops::scale(ctx, x, 0.75f);
      break;
    case 1:
      d += " >silu";
      r = ops::silu(ctx, x);
      break;
    case 2:
      d += " >sqr";
      r = ops::sqr(ctx, x);
      break;
    case 3:
      if (x->type != DType::f32) {  // cancellation would magnify x's f16/bf16 rounding past any tolerance
        d += " >scale";
        r = ops::scale(ctx, x, -1.5f);
        break;
      }
      d += " >add row";
      r = ops::add(ctx, x, b.input(DType::f32, {x->ne[0], 1, 1, 1}));
      break;
    case 4:
      d += " >mul row";
      r = ops::mul(ctx, x, b.input(DType::f32, {x->ne[0], 1, 1, 1}));
      break;
    default:
      d += " >cont(transpose)";
      r = ops::cont(ctx, ops::transpose(ctx, x));
      break;
  }
  return {r, r, std::max(in.tol * 10.0, conformance::tol_for(r->type, tol::kTranscend))};
}

Out recipe(CaseBuilder& b, Rng& rng, bool small, std::string& d) {
  const int64_t max0 = small ? 40 : 300;
  switch (pick(rng, 0, 9)) {
    case 0:
    case 1: return binary(b, rng, max0, d);
    case 2: return unary(b, rng, max0, d);
    case 3:
    case 4: return rows(b, rng, small ? 40 : 200, d);
    case 5: return rope(b, rng, d);
    case 6: return mul_mat(b, rng, small ? 64 : 256, d);
    case 7:
    case 8: return data(b, rng, small ? 64 : 128, d);
    default: return views(b, rng, d);
  }
}

}  // namespace

// Adds 1 (small) or 1-3 independent random computations to b, each output
// registered with b.output and its tolerance; desc gets one line each.
void build_random_graph(CaseBuilder& b, Rng& rng, bool small, std::string& desc) {
  const int n = small ? 1 : static_cast<int>(pick(rng, 1, 3));
  for (int i = 0; i < n; ++i) {
    for (int attempt = 0;; ++attempt) {
      std::string d;
      try {
        Out o = recipe(b, rng, small, d);
        if (o.dest == nullptr) o.dest = o.root;
        b.output(o.root, o.dest, o.tol);
        const bool floats = o.root == o.dest && o.root->type != DType::i32 && !is_quant(o.root->type);
        try {
          for (int p = 0; floats && p < 2 && chance(rng, 0.35); ++p) {
            std::string pd;
            o = post(b, rng, o, pd);
            b.output(o.root, o.tol);
            d += pd;
          }
        } catch (const Error&) {  // the outputs so far stand
        }
        desc += (desc.empty() ? "" : "; ") + d;
        break;
      } catch (const Error&) {
        if (attempt == 20) throw;  // tensors of the failed try stay unreferenced in the context
      }
    }
  }
}

// --- graphs written field by field (section 4), to be broken on purpose ---

namespace {

struct WT {
  uint8_t dtype = 0, op = 0;
  uint16_t flags = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {};
  int32_t params[16] = {};
  uint32_t src[4] = {};
  uint32_t view_src = 0;
  uint64_t view_offs = 0, buffer = 0, offset = 0;
};

struct WG {
  std::vector<WT> t;
  std::vector<uint32_t> nodes;
};

WG parse_wg(const std::vector<uint8_t>& bytes) {
  Reader r(bytes, "fuzz graph");
  WG g;
  g.t.resize(r.u32());
  for (WT& t : g.t) {
    t.dtype = r.u8();
    t.op = r.u8();
    t.flags = r.u16();
    for (int64_t& n : t.ne) n = r.i64();
    for (uint64_t& n : t.nb) n = r.u64();
    for (int32_t& p : t.params) p = r.i32();
    for (uint32_t& s : t.src) s = r.u32();
    t.view_src = r.u32();
    t.view_offs = r.u64();
    t.buffer = r.u64();
    t.offset = r.u64();
  }
  g.nodes.resize(r.u32());
  for (uint32_t& n : g.nodes) n = r.u32();
  r.expect_end();
  return g;
}

std::vector<uint8_t> encode_wg(const WG& g) {
  Writer w;
  w.u32(static_cast<uint32_t>(g.t.size()));
  for (const WT& t : g.t) {
    w.u8(t.dtype);
    w.u8(t.op);
    w.u16(t.flags);
    for (int64_t n : t.ne) w.i64(n);
    for (uint64_t n : t.nb) w.u64(n);
    for (int32_t p : t.params) w.i32(p);
    for (uint32_t s : t.src) w.u32(s);
    w.u32(t.view_src);
    w.u64(t.view_offs);
    w.u64(t.buffer);
    w.u64(t.offset);
  }
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (uint32_t n : g.nodes) w.u32(n);
  return w.data();
}

// A value near the edges of what the field means, or near its current value.
uint64_t interesting(Rng& rng, uint64_t cur) {
  switch (pick(rng, 0, 13)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return UINT64_MAX;  // -1
    case 3: return cur + 1;
    case 4: return cur - 1;
    case 5: return cur * 2;
    case 6: return cur / 2;
    case 7: return cur + static_cast<uint64_t>(pick(rng, 2, 64));
    case 8: return static_cast<uint64_t>(INT64_MAX);
    case 9: return static_cast<uint64_t>(INT64_MIN);
    case 10: return uint64_t{1} << pick(rng, 8, 63);
    case 11: return (uint64_t{1} << 32) + static_cast<uint64_t>(pick(rng, -2, 2));
    case 12: return static_cast<uint64_t>(pick(rng, 0, 4096));
    default: return rng();
  }
}

int32_t interesting_param(Rng& rng, int32_t cur) {
  constexpr float kFloats[] = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               1e30f,
                               -1e-30f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               1e-45f};
  if (chance(rng, 0.4)) {
    const float f = one_of(rng, kFloats);
    int32_t v;
    std::memcpy(&v, &f, 4);
    return v;
  }
  constexpr int32_t kInts[] = {0, 1, 2, 3, 4, -1, -2, 31, 32, 33, 64, INT32_MAX, INT32_MIN, 1 << 20};
  return chance(rng, 0.7) ? one_of(rng, kInts) : static_cast<int32_t>(cur + pick(rng, -3, 3));
}

// A reference to a tensor: 0 (none), nearby indices, itself, later ones, huge.
uint32_t interesting_ref(Rng& rng, uint32_t self, size_t n) {
  switch (pick(rng, 0, 5)) {
    case 0: return 0;
    case 1: return static_cast<uint32_t>(pick(rng, 1, static_cast<int64_t>(n)));  // any tensor, maybe later
    case 2: return self + 1;                                                      // itself
    case 3: return static_cast<uint32_t>(n + 1);                                  // past the end
    case 4: return UINT32_MAX;
    default: return self > 0 ? static_cast<uint32_t>(pick(rng, 1, self)) : 1;  // an earlier one
  }
}

}  // namespace

// Returns encoded with 1-3 random mutations; desc says which. foreign_handle
// is a live handle of another session (never usable here).
std::vector<uint8_t> mutate_graph(const std::vector<uint8_t>& encoded, Rng& rng, uint64_t foreign_handle,
                                  std::string& desc) {
  WG g = parse_wg(encoded);
  const int n = static_cast<int>(pick(rng, 1, 3));
  enum Byte { none, truncate, extend, flip, count };
  std::vector<std::pair<Byte, uint64_t>> byte_edits;  // applied after encoding
  for (int m = 0; m < n; ++m) {
    if (!desc.empty()) desc += "; ";
    const auto nt = static_cast<uint32_t>(g.t.size());
    // Nodes are the interesting tensors half the time.
    uint32_t i = static_cast<uint32_t>(pick(rng, 0, nt - 1));
    if (!g.nodes.empty() && chance(rng, 0.5)) i = g.nodes[static_cast<size_t>(pick(rng, 0, g.nodes.size() - 1))];
    if (i >= nt) i = 0;
    WT& t = g.t[i];
    std::string at = "t";  // (not "t" + ...: a GCC 12 -Wrestrict false positive)
    at += std::to_string(i);
    const int d = static_cast<int>(pick(rng, 0, 3));
    const WT& other = g.t[static_cast<size_t>(pick(rng, 0, nt - 1))];
    switch (pick(rng, 0, 19)) {
      case 0:
        t.dtype = chance(rng, 0.8) ? static_cast<uint8_t>(pick(rng, 0, kDTypeCount)) : 255;
        desc += at + ".dtype=" + std::to_string(t.dtype);
        break;
      case 1:
        t.op = chance(rng, 0.8) ? static_cast<uint8_t>(pick(rng, 0, kOpCount)) : 255;
        desc += at + ".op=" + std::to_string(t.op);
        break;
      case 2:
        t.flags = static_cast<uint16_t>(rng());
        desc += at + ".flags=" + std::to_string(t.flags);
        break;
      case 3:
      case 4:
        t.ne[d] = static_cast<int64_t>(interesting(rng, static_cast<uint64_t>(t.ne[d])));
        desc += at + ".ne[" + std::to_string(d) + "]=" + std::to_string(t.ne[d]);
        break;
      case 5:
      case 6:
        t.nb[d] = interesting(rng, t.nb[d]);
        desc += at + ".nb[" + std::to_string(d) + "]=" + std::to_string(t.nb[d]);
        break;
      case 7:
      case 8: {
        const int p = chance(rng, 0.7) ? static_cast<int>(pick(rng, 0, 3)) : static_cast<int>(pick(rng, 0, 15));
        t.params[p] = interesting_param(rng, t.params[p]);
        desc += at + ".params[" + std::to_string(p) + "]=" + std::to_string(t.params[p]);
        break;
      }
      case 9:
        t.src[d] = interesting_ref(rng, i, nt);
        desc += at + ".src[" + std::to_string(d) + "]=" + std::to_string(t.src[d]);
        break;
      case 10:
        t.view_src = interesting_ref(rng, i, nt);
        desc += at + ".view_src=" + std::to_string(t.view_src);
        break;
      case 11:
        t.view_offs = interesting(rng, t.view_offs);
        desc += at + ".view_offs=" + std::to_string(t.view_offs);
        break;
      case 12: {
        const uint64_t own = t.buffer;
        const uint64_t choices[] = {0, own + 1, own - 1, foreign_handle, UINT64_MAX, own == 0 ? 1 : own};
        t.buffer = one_of(rng, choices);
        desc += at + ".buffer=" + (t.buffer == foreign_handle ? "foreign" : std::to_string(t.buffer));
        break;
      }
      case 13:
        t.offset =
            chance(rng, 0.5) ? t.offset + static_cast<uint64_t>(pick(rng, -8, 8)) * 2 : interesting(rng, t.offset);
        desc += at + ".offset=" + std::to_string(t.offset);
        break;
      case 14: {
        const int k = static_cast<int>(pick(rng, 0, 4));
        const size_t nn = g.nodes.size();
        if (k == 0 && nn > 0) {
          g.nodes.erase(g.nodes.begin() + pick(rng, 0, nn - 1));
          desc += "nodes: one dropped";
        } else if (k == 1 && nn > 0) {
          g.nodes.insert(g.nodes.begin() + pick(rng, 0, nn), g.nodes[static_cast<size_t>(pick(rng, 0, nn - 1))]);
          desc += "nodes: one listed twice";
        } else if (k == 2) {
          const uint32_t v = chance(rng, 0.5) ? static_cast<uint32_t>(pick(rng, 0, nt)) : UINT32_MAX;
          g.nodes.push_back(v);
          desc += "nodes: +" + std::to_string(v);
        } else if (k == 3) {
          std::reverse(g.nodes.begin(), g.nodes.end());
          desc += "nodes: reversed";
        } else {
          g.nodes.clear();
          desc += "nodes: none";
        }
        break;
      }
      case 15: {  // two tensor records swapped, or one duplicated at the end
        const auto j = static_cast<uint32_t>(pick(rng, 0, nt - 1));
        if (chance(rng, 0.5)) {
          std::swap(g.t[i], g.t[j]);
          desc += "t" + std::to_string(i) + "<->t" + std::to_string(j);
        } else {
          g.t.push_back(g.t[j]);
          desc += "t" + std::to_string(j) + " duplicated as t" + std::to_string(nt);
        }
        break;
      }
      case 16: {
        const Byte e = static_cast<Byte>(pick(rng, 1, 4));
        byte_edits.push_back({e, rng()});
        desc += e == truncate ? "bytes: truncated"
                : e == extend ? "bytes: extended"
                : e == flip   ? "bytes: flipped"
                              : "bytes: n_tensors";
        break;
      }
      case 17:  // another tensor's shape and strides: plausible, usually wrong
        std::copy(std::begin(other.ne), std::end(other.ne), std::begin(t.ne));
        std::copy(std::begin(other.nb), std::end(other.nb), std::begin(t.nb));
        desc += at + " shaped as another";
        break;
      case 18:  // another tensor's memory: a node writing over its own input
        t.buffer = other.buffer;
        t.offset = other.offset;
        desc += at + " placed on another (offset " + std::to_string(t.offset) + ")";
        break;
      default:  // a leaf turned into a view of an earlier tensor, or a view into a leaf
        if (t.view_src != 0) {
          t.view_src = 0;
          t.op = 0;
          desc += at + " view->leaf";
        } else {
          t.view_src = i > 0 ? static_cast<uint32_t>(pick(rng, 1, i)) : 1;
          t.buffer = 0;
          desc += at + ".view_src=" + std::to_string(t.view_src) + " buffer=0";
        }
        break;
    }
  }
  std::vector<uint8_t> out = encode_wg(g);
  for (const auto& [e, r] : byte_edits) {
    if (out.empty()) break;
    if (e == truncate) {
      out.resize(r % out.size());
    } else if (e == extend) {
      for (uint64_t k = 0; k < 1 + r % 16; ++k) out.push_back(static_cast<uint8_t>(r >> (8 * (k % 8))));
    } else if (e == flip) {
      out[r % out.size()] ^= static_cast<uint8_t>(1u << (r >> 32) % 8);
    } else if (out.size() >= 4) {
      const uint32_t choices[] = {0,
                                  1,
                                  UINT32_MAX,
                                  kMaxGraphTensors,
                                  kMaxGraphTensors + 1,
                                  static_cast<uint32_t>(g.t.size() + 1),
                                  static_cast<uint32_t>(g.t.size() - 1)};
      const uint32_t v = choices[(r >> 8) % std::size(choices)];
      for (int k = 0; k < 4; ++k) out[static_cast<size_t>(k)] = static_cast<uint8_t>(v >> (8 * k));
    }
  }
  return out;
}

}  // namespace weft::rpc::fuzz
