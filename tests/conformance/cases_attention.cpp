// Cases: flash_attn, fused attention. Keys and values f32, f16 or q8_0 (as
// values the blocks hold exactly, so the f32 tolerance applies); head sizes
// with and without a tail past the vector width; grouped heads (H / H_kv of
// 1, 2, 8 and 12: the kernel takes up to 8 heads of a group at a time); no mask, a causal one, a random one with a fully masked row;
// soft-capping; q as the permuted view the model passes and k / v as views
// of a cache's rows, heads side by side; and the same after set_rows writes
// into f16 and q8_0 caches, as a layer reads them; attention sinks.
#include <cmath>
#include <string>

#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

// f32 dot products and sums along a row (measured: under 1e-11).
constexpr double kAttnTol = tol::kMatF32;
// After set_rows into f16 caches: the reference keeps the written values
// unrounded, the caches hold them in f16 (measured: 5.6e-9).
constexpr double kAttnAfterF16WritesTol = 1e-7;
// After set_rows into q8_0 caches: the reference stores the written rows as
// the standard quantizer does (cases.h), so only f32 sums differ (measured:
// 1.1e-7).
constexpr double kAttnAfterQ8WritesTol = 1e-6;

struct AttnShape {
  int64_t hd, n_head, n_head_kv, n_q, n_kv;
};

std::string shape_name(const AttnShape& s) {
  return "hd=" + std::to_string(s.hd) + " heads=" + std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv) +
         " q=" + std::to_string(s.n_q) + " kv=" + std::to_string(s.n_kv);
}

// Rows 1 and 2 of a random mask with every position masked: their outputs are 0.
Init mask_with_dead_row() {
  return [](const Tensor& t, Rng& rng, std::vector<float>& v) {
    random_mask()(t, rng, v);
    const int64_t n_kv = t.ne[0];
    for (int64_t j = 0; j < n_kv && t.ne[1] > 1; ++j) v[static_cast<size_t>(n_kv + j)] = -INFINITY;
  };
}

enum class MaskKind { none, causal, random };

// sinks: one f32 logit per head (gpt-oss), spread over [-3, 3] so that some
// outweigh the scores and some barely count.
void add_plain(std::vector<Case>& cases, const AttnShape& s, DType kv, MaskKind mk, float cap, bool sinks = false) {
  const std::string mask_name = mk == MaskKind::none ? "" : mk == MaskKind::causal ? " causal" : " random-mask";
  const std::string name = "flash_attn " + dtype_str(kv) + " " + shape_name(s) + mask_name +
                           (cap > 0 ? " cap=" + std::to_string(static_cast<int>(cap)) : "") + (sinks ? " sinks" : "");
  cases.push_back({name, [s, kv, mk, cap, sinks](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     // q as the model has it, [hd, heads, n_q] permuted to [hd, n_q, heads].
                     Tensor* q = ops::permute(ctx, b.input(DType::f32, {s.hd, s.n_head, s.n_q, 1}), 0, 2, 1, 3);
                     const Init values = kv == DType::q8_0 ? q8_0_grid() : Init{};
                     Tensor* k = b.input(kv, {s.hd, s.n_kv, s.n_head_kv, 1}, values);
                     Tensor* v = b.input(kv, {s.hd, s.n_kv, s.n_head_kv, 1}, values);
                     Tensor* mask = nullptr;
                     if (mk == MaskKind::causal) mask = b.input(DType::f32, {s.n_kv, s.n_q, 1, 1}, causal_mask(s.n_q));
                     if (mk == MaskKind::random) mask = b.input(DType::f32, {s.n_kv, s.n_q, 1, 1}, mask_with_dead_row());
                     const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
                     Tensor* sk = sinks ? b.input(DType::f32, {s.n_head, 1, 1, 1}, uniform(-3.0f, 3.0f)) : nullptr;
                     b.output(ops::flash_attn(ctx, q, k, v, mask, scale, cap, sk), kAttnTol);
                   }});
}

// The layer's reads: new rows written into caches [hd * H_kv, n_ctx] of
// type ct, then keys and values viewed per head from the writes.
void add_cache_case(std::vector<Case>& cases, DType ct, int64_t hd, double tol) {
  const std::string name = "flash_attn " + dtype_str(ct) + " caches after set_rows hd=" + std::to_string(hd) +
                           " heads=4/2 q=3 kv=12";
  cases.push_back({name, [ct, hd, tol](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     const int64_t hkv = 2, heads = 4, n_q = 3, n_kv = 12;
                     Tensor* kcache = b.input(ct, {hd * hkv, n_kv, 1, 1}, ct == DType::q8_0 ? q8_0_grid() : Init{});
                     Tensor* vcache = b.input(ct, {hd * hkv, n_kv, 1, 1}, ct == DType::q8_0 ? q8_0_grid() : Init{});
                     Tensor* slots = b.input(DType::i32, {n_q, 1, 1, 1}, distinct_indices(n_kv));
                     Tensor* kw = ops::set_rows(ctx, kcache, b.input(DType::f32, {hd * hkv, n_q, 1, 1}), slots);
                     Tensor* vw = ops::set_rows(ctx, vcache, b.input(DType::f32, {hd * hkv, n_q, 1, 1}), slots);
                     const int64_t ne[3] = {hd, n_kv, hkv};
                     const size_t nb[3] = {traits(ct).unit_bytes, kw->nb[1], row_bytes(ct, hd)};
                     Tensor* k = ops::view(ctx, kw, ne, nb, 0);
                     Tensor* v = ops::view(ctx, vw, ne, nb, 0);
                     Tensor* q = ops::permute(ctx, b.input(DType::f32, {hd, heads, n_q, 1}), 0, 2, 1, 3);
                     Tensor* mask = b.input(DType::f32, {n_kv, n_q, 1, 1}, causal_mask(n_q));
                     b.output(ops::flash_attn(ctx, q, k, v, mask, 0.25f), tol);
                   }});
}

}  // namespace

void add_attention_cases(std::vector<Case>& cases) {
  const AttnShape shapes[] = {
      {32, 4, 2, 1, 7},    // decode, grouped heads
      {64, 4, 4, 5, 33},   // a prompt, one kv head per head
      {40, 8, 1, 3, 17},   // a tail past the vector width, all heads on one kv head
      {128, 2, 2, 2, 70},  // a large head
      {16, 12, 1, 2, 9},   // 12 heads on one kv head: the kernel takes them 8, then 4
  };
  for (const AttnShape& s : shapes) {
    for (DType kv : {DType::f32, DType::f16}) {
      add_plain(cases, s, kv, MaskKind::causal, 0.0f);
    }
  }
  // 4 heads per kv head and more: the transposed key tiles, over several
  // tiles, a partial one, masks and a soft-cap.
  for (DType kv : {DType::f32, DType::f16, DType::q8_0}) {
    add_plain(cases, {64, 8, 2, 4, 50}, kv, MaskKind::causal, 0.0f);
    add_plain(cases, {64, 8, 2, 4, 50}, kv, MaskKind::random, 4.0f);
  }
  add_plain(cases, {48, 6, 1, 3, 37}, DType::f16, MaskKind::random, 0.0f);  // 6 heads, d a multiple of 16 only
  // q8_0 rows: head sizes of whole blocks.
  add_plain(cases, shapes[0], DType::q8_0, MaskKind::causal, 0.0f);
  add_plain(cases, shapes[1], DType::q8_0, MaskKind::random, 0.0f);
  add_plain(cases, shapes[3], DType::q8_0, MaskKind::causal, 3.0f);
  add_plain(cases, {32, 12, 1, 2, 41}, DType::q8_0, MaskKind::none, 0.0f);
  add_plain(cases, shapes[0], DType::f16, MaskKind::none, 0.0f);
  add_plain(cases, shapes[1], DType::f16, MaskKind::random, 0.0f);
  add_plain(cases, shapes[2], DType::f32, MaskKind::random, 0.0f);
  add_plain(cases, shapes[1], DType::f16, MaskKind::causal, 5.0f);  // Gemma 2's soft-capped scores
  add_plain(cases, shapes[3], DType::f32, MaskKind::random, 2.0f);
  // Attention sinks (gpt-oss): grouped and single heads, masks with a dead
  // row (zeros: a sink has no value), a many-head group, f16 and q8_0 rows.
  add_plain(cases, shapes[0], DType::f32, MaskKind::causal, 0.0f, true);
  add_plain(cases, shapes[1], DType::f16, MaskKind::random, 0.0f, true);
  add_plain(cases, {64, 8, 2, 4, 50}, DType::f16, MaskKind::causal, 0.0f, true);
  add_plain(cases, {32, 12, 1, 2, 41}, DType::q8_0, MaskKind::none, 0.0f, true);
  add_cache_case(cases, DType::f16, 16, kAttnAfterF16WritesTol);
  add_cache_case(cases, DType::q8_0, 32, kAttnAfterQ8WritesTol);
}

}  // namespace weft::conformance
