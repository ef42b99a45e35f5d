// weft_fuzz_worker's graph recipes, one per op family (fuzz_structured.h
// lists the parts; fuzz_structured_graphs.cpp picks among them). Each builds
// one valid computation on random shapes, dtypes and operand layouts in a
// CaseBuilder, says what it built in d, and returns what to compare with the
// tolerance cases.h gives that op and dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>

#include "conformance/cases.h"
#include "fuzz_structured.h"
#include "weft/core/ops.h"

namespace weft::rpc::fuzz::gen {

using conformance::CaseBuilder;
using conformance::dtype_str;
using conformance::Init;
using conformance::Layout;
using conformance::Shape;
using conformance::shape_str;
namespace tol = conformance::tol;

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
  const int k = static_cast<int>(pick(rng, 0, 9));
  constexpr const char* kNames[] = {"scale",    "sqr",     "sqrt",    "silu",      "gelu",
                                    "swiglu",   "gelu_erf", "sigmoid", "softcap", "swiglu_oai"};
  constexpr float kScales[] = {0.37f, -2.0f, 0.0f, 1e-3f, 16.0f};
  float sc = one_of(rng, kScales);
  if (t == DType::f16 && sc == 1e-3f) sc = 0.37f;  // f16 results that small go subnormal: not the tolerance's model
  constexpr float kCaps[] = {0.5f, 2.5f, 30.0f, 50.0f};
  const float cap = one_of(rng, kCaps);
  d += std::string(kNames[k]) + " " + dtype_str(t) + " " + shape_str(s) + lay(l, "a");
  if (k == 0) d += " s=" + std::to_string(sc);
  if (k == 8) d += " cap=" + std::to_string(cap);
  Init init = k == 2   ? conformance::uniform(0.0f, 2.0f)
              : k == 8 ? conformance::uniform(-2.0f * cap, 2.0f * cap)
              : k == 9 ? conformance::uniform(-10.0f, 10.0f)  // past the clamp at 7
              : k >= 3 ? conformance::uniform(-4.0f, 4.0f)
                       : Init{};
  Tensor* x = conformance::operand(b, t, s, l, init);
  Tensor* r = nullptr;
  switch (k) {
    case 0: r = ops::scale(ctx, x, sc); break;
    case 1: r = ops::sqr(ctx, x); break;
    case 2: r = ops::sqrt(ctx, x); break;
    case 3: r = ops::silu(ctx, x); break;
    case 4: r = ops::gelu(ctx, x); break;
    case 6: r = ops::gelu_erf(ctx, x); break;
    case 7: r = ops::sigmoid(ctx, x); break;
    case 8: r = ops::softcap(ctx, x, cap); break;
    case 9: {
      const DType tb = chance(rng, 0.7) ? t : one_of(rng, kFloat);
      d += " b=" + dtype_str(tb);
      r = ops::swiglu_oai(ctx, x, conformance::operand(b, tb, s, l, conformance::uniform(-10.0f, 10.0f)), 1.702f, 7.0f);
      break;
    }
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
  Tensor* sinks = nullptr;
  if (chance(rng, 0.3)) {  // attention sinks (protocol 1.9): one per index of dim 2
    d += " sinks";
    sinks = b.input(DType::f32, {s[2], 1, 1, 1}, conformance::uniform(-3.0f, 3.0f));
  }
  return {ops::soft_max(ctx, x, mask, sc, sinks), nullptr, tol::kTranscend};
}

// rope, or half the time rope_ext: frequency factors (none, a leaf, or a
// contiguous view inside a bigger leaf) and scaling drawn.
Out rope(CaseBuilder& b, Rng& rng, std::string& d) {
  Context& ctx = b.ctx();
  const int64_t hd = 2 * pick(rng, 1, 32), nh = pick(rng, 1, 4), nt = pick(rng, 1, 6);
  const int n_dims = static_cast<int>(2 * pick(rng, 1, hd / 2));
  const RopeMode mode = chance(rng, 0.5) ? RopeMode::normal : RopeMode::neox;
  constexpr float kBase[] = {10000.0f, 1e6f, 500000.0f};
  const float base = one_of(rng, kBase);
  const int src = static_cast<int>(pick(rng, 0, 2));
  const bool ext = chance(rng, 0.5);
  d += std::string(ext ? "rope_ext" : "rope") + " f32 " + shape_str({hd, nh, nt, 1}) +
       " n_dims=" + std::to_string(n_dims) + (mode == RopeMode::neox ? " neox" : " normal") +
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
  if (!ext) return {ops::rope(ctx, x, pos, n_dims, mode, base), nullptr, tol::kRope};
  constexpr float kScale[] = {1.0f, 0.25f, 0.5f, 2.0f};
  constexpr float kAttn[] = {1.0f, 1.19f, 0.8f};
  const ops::RopeScaling sc{one_of(rng, kScale), one_of(rng, kAttn)};
  const int64_t half = n_dims / 2;
  const int factors = static_cast<int>(pick(rng, 0, 2));  // 0 none, 1 a leaf, 2 a view
  Tensor* ff = nullptr;
  if (factors == 1) {
    ff = b.input(DType::f32, {half, 1, 1, 1}, conformance::uniform(0.5f, 40.0f));
  } else if (factors == 2) {
    const int64_t skip = pick(rng, 0, 3);
    Tensor* big = b.input(DType::f32, {half + skip + pick(rng, 0, 3), 1, 1, 1}, conformance::uniform(1.0f, 8.0f));
    ff = ops::view_1d(ctx, big, half, static_cast<size_t>(skip) * sizeof(float));
  }
  d += std::string(factors == 0 ? "" : factors == 1 ? " ff" : " ff=view") + " scale=" + std::to_string(sc.freq_scale) +
       " attn=" + std::to_string(sc.attn_factor);
  return {ops::rope_ext(ctx, x, pos, ff, n_dims, mode, base, sc), nullptr, tol::kRope};
}

// flash_attn: q packed or the permuted view the model passes; k and v (f32,
// f16 or q8_0) packed
// or per-head views of a cache's rows; grouped heads; no mask, a causal or
// a random one; a soft-cap half the time.
Out attention(CaseBuilder& b, Rng& rng, std::string& d) {
  Context& ctx = b.ctx();
  constexpr int64_t kHeadSizes[] = {8, 16, 32, 40, 64};
  // Up to 10 query heads per kv head: the kernel scores 4 or more from a
  // transposed key tile, fewer by dot products.
  const int64_t hd = one_of(rng, kHeadSizes), hkv = pick(rng, 1, 3), heads = hkv * pick(rng, 1, 10);
  const int64_t nq = pick(rng, 1, 5), nkv = pick(rng, 1, 40);
  // q8_0 rows (whole blocks per head) hold grid values exactly: the same
  // tolerance as f16 and f32.
  const DType kv = hd % 32 == 0 && chance(rng, 0.33) ? DType::q8_0 : chance(rng, 0.5) ? DType::f16 : DType::f32;
  const conformance::Init values = kv == DType::q8_0 ? conformance::q8_0_grid() : conformance::Init{};
  const bool permuted_q = chance(rng, 0.5), cache_view = chance(rng, 0.5);
  Tensor* q = permuted_q ? ops::permute(ctx, b.input(DType::f32, {hd, heads, nq, 1}), 0, 2, 1, 3)
                         : b.input(DType::f32, {hd, nq, heads, 1});
  auto kv_operand = [&] {
    if (!cache_view) return b.input(kv, {hd, nkv, hkv, 1}, values);
    Tensor* cache = b.input(kv, {hd * hkv, nkv + pick(rng, 0, 4), 1, 1}, values);
    const int64_t ne[3] = {hd, nkv, hkv};
    const size_t nb[3] = {traits(kv).unit_bytes, cache->nb[1], row_bytes(kv, hd)};
    return ops::view(ctx, cache, ne, nb, 0);
  };
  Tensor* k = kv_operand();
  Tensor* v = kv_operand();
  const int m = static_cast<int>(pick(rng, 0, 2));  // 0 none, 1 causal, 2 random
  Tensor* mask = nullptr;
  if (m == 1 && nkv >= nq) mask = b.input(DType::f32, {nkv, nq, 1, 1}, conformance::causal_mask(nq));
  if (m == 2) mask = b.input(DType::f32, {nkv, nq + pick(rng, 0, 2), 1, 1}, conformance::random_mask());
  const float cap = chance(rng, 0.5) ? 0.0f : static_cast<float>(pick(rng, 1, 10));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  d += "flash_attn " + dtype_str(kv) + " hd=" + std::to_string(hd) + " heads=" + std::to_string(heads) + "/" +
       std::to_string(hkv) + " q=" + std::to_string(nq) + " kv=" + std::to_string(nkv) +
       (permuted_q ? " q=permuted" : "") + (cache_view ? " kv=cache_views" : "") +
       (mask == nullptr ? "" : m == 1 ? " causal" : " mask") + (cap > 0 ? " cap=" + std::to_string(cap) : "");
  return {ops::flash_attn(ctx, q, k, v, mask, scale, cap), nullptr, 1e-8};
}

Out mul_mat(CaseBuilder& b, Rng& rng, int64_t max0, std::string& d) {
  Context& ctx = b.ctx();
  const DType w = one_of(rng, kWeights);
  const int64_t k = row(rng, w, std::max<int64_t>(max0, 64));
  // Quantized weights round the activations to 8 bits: products with few
  // outputs take packed activations that 8-bit blocks hold exactly (cases.h,
  // kMatQuant); a strided or transposed operand would not keep the grid's
  // blocks.
  struct Acts {
    Init init;
    double tol;
    Layout layout;
  };
  auto activations = [&](int64_t outputs, Layout drawn) {
    if (is_quant(w) && outputs < conformance::tol::kMinRandomOutputs)
      return Acts{conformance::q8_act_grid(), conformance::tol::kMatQuantExact, Layout::packed};
    return Acts{Init{}, conformance::matmul_tol(w), drawn};
  };
  if (chance(rng, 0.08)) {  // routed_rows: the rows an expert slice reads
    const int64_t n_used = pick(rng, 1, 3), n_tok = pick(rng, 1, 9), n_ids = pick(rng, 2, 9);
    const auto first = static_cast<int32_t>(pick(rng, 0, n_ids - 1));
    const auto count = static_cast<int32_t>(pick(rng, 1, n_ids - first));
    d += "routed_rows f32 [" + std::to_string(k) + "," + std::to_string(n_tok) + "] n_used=" +
         std::to_string(n_used) + " experts [" + std::to_string(first) + ",+" + std::to_string(count) + ") of " +
         std::to_string(n_ids);
    Tensor* x = b.input(DType::f32, {k, n_tok, 1, 1});
    Tensor* ids = b.input(DType::i32, {n_used, n_tok, 1, 1}, conformance::indices(n_ids));
    return {ops::routed_rows(ctx, x, ids, first, count), nullptr, tol::kExact};
  }
  if (chance(rng, 0.25)) {  // mul_mat_id
    const int64_t n_exp = pick(rng, 1, 4), n_used = pick(rng, 1, n_exp), n_tok = pick(rng, 1, 4);
    const int64_t n_b = chance(rng, 0.5) ? 1 : n_used, m = size(rng, 24);
    const Shape bs = {k, n_b, n_tok, 1};
    const Acts x_acts = activations(m * n_used * n_tok, chance(rng, 0.7) ? Layout::packed : Layout::strided);
    // Half the time a slice of the layer's experts (an expert split): ids
    // name n_exp + 3 experts, as holds [id_base, id_base + n_exp).
    const int32_t id_base = chance(rng, 0.5) ? static_cast<int32_t>(pick(rng, 1, 2)) : 0;
    d += "mul_mat_id " + dtype_str(w) + " " + shape_str({k, m, n_exp, 1}) + "x" + shape_str(bs) +
         " n_used=" + std::to_string(n_used) + " id_base=" + std::to_string(id_base) + lay(x_acts.layout, "b");
    Tensor* as = b.input(w, {k, m, n_exp, 1});
    Tensor* x = conformance::operand(b, DType::f32, bs, x_acts.layout, x_acts.init);
    Tensor* ids = b.input(DType::i32, {n_used, n_tok, 1, 1}, conformance::indices(id_base > 0 ? n_exp + 3 : n_exp));
    return {ops::mul_mat_id(ctx, as, x, ids, id_base), nullptr, x_acts.tol};
  }
  const int64_t a2 = chance(rng, 0.7) ? 1 : 2, a3 = chance(rng, 0.8) ? 1 : 2;
  const Shape as = {k, size(rng, 40), a2, a3};
  const Shape bs = {k, chance(rng, 0.1) ? pick(rng, 30, 70) : size(rng, 12), a2 * pick(rng, 1, 2),
                    a3 * pick(rng, 1, 2)};
  const int wl = static_cast<int>(pick(rng, 0, 3));  // 0-1 packed, 2 strided, 3 permuted (rows stay packed)
  const Acts x_acts = activations(as[1] * bs[1] * bs[2] * bs[3], layout(rng, DType::f32));
  const Layout lb = x_acts.layout;
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
  Tensor* x = conformance::operand(b, DType::f32, bs, lb, x_acts.init);
  return {ops::mul_mat(ctx, a, x), nullptr, x_acts.tol};
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
    // A decoded min (q4_1, q5_1, q2_K, q4_K, q5_K) is rounded once in f32.
    return {ops::get_rows(ctx, a, idx), nullptr, is_quant(t) ? tol::kArith : tol::kExact};
  }
  if (k == 1) {  // set_rows into any weight dtype
    const DType t = one_of(rng, kWeights);
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
                                   {DType::f16, DType::f32},  {DType::bf16, DType::f32}, {DType::f16, DType::bf16},
                                   {DType::i32, DType::i32}};
    // f32 into a block type a third of the time.
    const bool quantize = chance(rng, 0.34);
    const auto& p = kPairs[pick(rng, 0, std::size(kPairs) - 1)];
    const DType ta = quantize ? DType::f32 : p[0];
    const DType tb = quantize ? one_of(rng, conformance::kQuantTypes) : p[1];
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
    const DType t = chance(rng, 0.2) ? one_of(rng, conformance::kQuantTypes) : one_of(rng, kPlain);
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
      if (x->type != DType::f32) {  // squares of small f16/bf16 values reach subnormals: rounding past any tolerance
        d += " >scale";
        r = ops::scale(ctx, x, 0.5f);
        break;
      }
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

}  // namespace weft::rpc::fuzz::gen
