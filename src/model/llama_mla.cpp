// Multi-head latent attention (DeepSeek-V2/V3, LlamaParams::mla()), with the
// absorbed projections: the cache holds one row per token, the normalized
// latent c_kv [n_lora_kv] then the shared rope key k_pe [n_rot]. Each head's
// query is taken into latent space (q_nope · W_kb) beside its rope part, so
// every head attends over the one cached "kv head" (multi-query attention,
// key [c_kv, k_pe], value c_kv: the first n_lora_kv columns of the same
// rows), and its latent output is expanded by W_vb before attn_output.
// Equal to decompressing per-head K = [W_kb c_kv, k_pe] and V = W_vb c_kv,
// at a fraction of the cache (docs/models.md, "deepseek2").
#include "model/llama_mla.h"

#include "weft/core/ops.h"

namespace weft::model::detail {

Tensor* build_mla_attention(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                            const LlamaModel::Inputs& in, bool fused) {
  const int64_t n = cur->ne[1], n_kv = in.mask->ne[0];
  const int64_t H = p.n_head, rank = p.n_lora_kv, rot = p.n_rot, nope = p.mla_k_dim - p.n_rot;
  const size_t f32 = sizeof(float);

  // Queries [mla_k_dim, H, n]: each head's nope part, then its rope part.
  Tensor* q = l.wq ? ops::mul_mat(ctx, l.wq, cur)
                   : ops::mul_mat(ctx, l.wq_b, ops::mul(ctx, ops::rms_norm(ctx, ops::mul_mat(ctx, l.wq_a, cur), p.rms_eps),
                                                        l.q_a_norm));
  const size_t q_head = static_cast<size_t>(p.mla_k_dim) * f32;
  Tensor* q_nope = ops::view_3d(ctx, q, nope, H, n, q_head, q_head * static_cast<size_t>(H), 0);
  Tensor* q_pe = ops::view_3d(ctx, q, rot, H, n, q_head, q_head * static_cast<size_t>(H),
                              static_cast<size_t>(nope) * f32);

  // The latent and the shared rope key: [rank + rot, n].
  Tensor* kv = ops::mul_mat(ctx, l.wkv_a_mqa, cur);
  Tensor* c_kv = ops::view_2d(ctx, kv, rank, n, kv->nb[1], 0);
  Tensor* k_pe = ops::view_3d(ctx, kv, rot, 1, n, kv->nb[1], kv->nb[1], static_cast<size_t>(rank) * f32);

  const ops::RopeScaling scaling{p.rope_freq_scale, p.rope_attn_factor};
  const int n_rot = static_cast<int>(rot);
  auto rope = [&](Tensor* x) {
    if (!in.rope_factors && scaling.freq_scale == 1.f && scaling.attn_factor == 1.f)
      return ops::rope(ctx, x, in.positions, n_rot, p.rope_mode, p.rope_base);
    return ops::rope_ext(ctx, x, in.positions, in.rope_factors, n_rot, p.rope_mode, p.rope_base, scaling);
  };
  q_pe = rope(q_pe);  // [rot, H, n]
  k_pe = rope(k_pe);  // [rot, 1, n]
  c_kv = ops::mul(ctx, ops::rms_norm(ctx, c_kv, p.rms_eps), l.kv_a_norm);  // [rank, n]

  // Absorbed queries: per head, W_kb [nope, rank] applied to q_nope.
  Tensor* q_lat = ops::mul_mat(ctx, l.wk_b, ops::permute(ctx, q_nope, 0, 2, 1, 3));  // [rank, n, H]
  q_lat = ops::permute(ctx, q_lat, 0, 2, 1, 3);                                      // [rank, H, n]
  Tensor* Q = ops::concat(ctx, q_lat, q_pe, 0);                                       // [rank + rot, H, n]
  Tensor* K = ops::concat(ctx, ops::reshape(ctx, c_kv, {rank, 1, n}), k_pe, 0);        // [rank + rot, 1, n]

  // Write the new rows, then read [0, n_kv) through views of the write.
  Tensor* written = ops::set_rows(ctx, l.k_cache, ops::permute(ctx, K, 0, 2, 1, 3), in.kv_rows);
  const size_t unit = traits(l.k_cache->type).unit_bytes;
  const int64_t k_ne[3] = {rank + rot, n_kv, 1};
  const int64_t v_ne[3] = {rank, n_kv, 1};
  const size_t nb[3] = {unit, l.k_cache->nb[1], l.k_cache->nb[2]};
  Tensor* keys = ops::view(ctx, written, k_ne, nb, 0);
  Tensor* values = ops::view(ctx, written, v_ne, nb, 0);  // c_kv: the first rank columns
  Tensor* qh = ops::permute(ctx, Q, 0, 2, 1, 3);          // [rank + rot, n, H]
  Tensor* lat;                                            // [rank, n, H]
  if (fused) {
    lat = ops::flash_attn(ctx, qh, keys, values, in.mask, p.attn_scale, 0.0f);  // [rank, H, n]
    lat = ops::permute(ctx, lat, 0, 2, 1, 3);
  } else {
    // Values transposed [n_kv, rank, 1], packed, as the unfused product reads them.
    const int64_t vt_ne[3] = {n_kv, rank, 1};
    const size_t vt_nb[3] = {l.k_cache->nb[1], unit, l.k_cache->nb[2]};
    Tensor* values_t = ops::cont(ctx, ops::view(ctx, written, vt_ne, vt_nb, 0));
    Tensor* kq = ops::soft_max(ctx, ops::mul_mat(ctx, keys, qh), in.mask, p.attn_scale);  // [n_kv, n, H]
    lat = ops::mul_mat(ctx, values_t, kq);
  }

  // Each head's latent output through its W_vb, then the output projection.
  Tensor* o = ops::mul_mat(ctx, l.wv_b, lat);            // [v, n, H]
  o = ops::cont(ctx, ops::permute(ctx, o, 0, 2, 1, 3));                        // [v, H, n]
  o = ops::reshape(ctx, o, {p.mla_v_dim * H, n});
  return ops::mul_mat(ctx, l.wo, o);
}

}  // namespace weft::model::detail
