// The attention half of a block for every family (docs/models.md), and the
// graph inputs all layers share: positions, the causal and sliding-window
// masks, and the rope frequency factors.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/llama_ffn.h"
#include "model/llama_mla.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/model/model.h"

namespace weft::model {
namespace {

// Writes a mask, the cache rows or the rope factors, inputs some graphs do
// not read. An input no node of the built graph reads is not placed and has
// no buffer: the global mask when every layer slides (Phi-3's window on all
// layers), and the global rows too when those layers keep rings. Nothing
// reads it, so nothing is written. The inputs every graph reads (tokens,
// positions) go through tensor_set, which refuses one left unplaced.
void write_input(Tensor* t, const void* data, size_t bytes) {
  if (t != nullptr && t->buffer != nullptr) tensor_set(*t, data, 0, bytes);
}

// The sliding mask over a ring of R rows (n_kv of them read): for a query
// at q, row j holds the latest position written there, q - ((q - j) mod R)
// (Executor::check_ring keeps it so); visible when that position is not
// negative and within the window.
void fill_ring_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past, int64_t window, int64_t rows) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t q = n_past + i;
    for (int64_t j = 0; j < n_kv; ++j) {
      const int64_t back = ((q - j) % rows + rows) % rows;  // q minus the position in row j
      mask[static_cast<size_t>(i * n_kv + j)] = back <= q && back < window ? 0.0f : -INFINITY;
    }
  }
}

}  // namespace

LlamaModel::Inputs LlamaModel::new_inputs(Context& ctx, int64_t n, int64_t n_kv, int64_t n_out) const {
  Inputs in;
  in.tokens = ctx.new_tensor(DType::i32, {n});
  in.positions = ctx.new_tensor(DType::i32, {n});
  in.kv_rows = ctx.new_tensor(DType::i32, {n, params_.n_head_kv});
  in.mask = ctx.new_tensor(DType::f32, {n_kv, n});
  if (params_.any_swa()) {
    // With a ring, sliding layers read its rows: all of them once positions
    // wrap, else the first n_kv (the same rows as without one).
    in.mask_swa = ctx.new_tensor(DType::f32, {ring_rows_ > 0 ? std::min(n_kv, ring_rows_) : n_kv, n});
    if (ring_rows_ > 0) in.kv_rows_swa = ctx.new_tensor(DType::i32, {n, params_.n_head_kv});
  }
  if (!rope_factors_.empty()) in.rope_factors = ctx.new_tensor(DType::f32, {static_cast<int64_t>(rope_factors_.size())});
  if (n_out > 0) in.out_rows = ctx.new_tensor(DType::i32, {n_out});
  for (Tensor* t : {in.tokens, in.positions, in.kv_rows, in.mask, in.mask_swa, in.kv_rows_swa, in.rope_factors,
                    in.out_rows})
    if (t) t->flags |= kFlagInput;
  return in;
}

void LlamaModel::set_inputs(const Inputs& in, std::span<const int32_t> tokens, int64_t n_past) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_kv = in.mask->ne[0];
  if (in.tokens->ne[0] != n)
    fail(ErrorKind::invalid_input, "model",
         std::to_string(n) + " tokens for inputs of " + std::to_string(in.tokens->ne[0]));
  // Host copies kept between calls: no allocation per token.
  std::vector<int32_t>& positions = positions_scratch_;
  std::vector<int32_t>& kv_rows = kv_rows_scratch_;
  std::vector<float>& mask = mask_scratch_;
  positions.resize(static_cast<size_t>(n));
  kv_rows.resize(static_cast<size_t>(n * params_.n_head_kv));
  mask.resize(static_cast<size_t>(n_kv * n));
  for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(n_past + i);
  for (int64_t h = 0; h < params_.n_head_kv; ++h)
    std::copy(positions.begin(), positions.end(), kv_rows.begin() + h * n);
  tensor_set(*in.tokens, tokens.data(), 0, in.tokens->nbytes());
  tensor_set(*in.positions, positions.data(), 0, in.positions->nbytes());
  write_input(in.kv_rows, kv_rows.data(), in.kv_rows->nbytes());
  if (params_.causal) {
    fill_causal_mask(mask, n_kv, n, n_past);
  } else {  // bidirectional: the whole sequence, given in one call
    if (n_past != 0)
      fail(ErrorKind::invalid_input, "model",
           params_.arch_name + " attends both ways: a sequence is evaluated whole, from position 0 (not from " +
               std::to_string(n_past) + ")");
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n_kv; ++j) mask[static_cast<size_t>(i * n_kv + j)] = j < n ? 0.0f : -INFINITY;
  }
  write_input(in.mask, mask.data(), in.mask->nbytes());
  if (in.kv_rows_swa) {  // the ring: position p in row p mod R
    for (size_t i = 0; i < kv_rows.size(); ++i) kv_rows[i] = static_cast<int32_t>(kv_rows[i] % ring_rows_);
    write_input(in.kv_rows_swa, kv_rows.data(), in.kv_rows_swa->nbytes());
    mask.resize(static_cast<size_t>(in.mask_swa->ne[0] * n));
    fill_ring_mask(mask, in.mask_swa->ne[0], n, n_past, params_.n_swa, ring_rows_);
    write_input(in.mask_swa, mask.data(), in.mask_swa->nbytes());
  } else if (in.mask_swa && in.mask_swa->buffer) {
    fill_causal_mask(mask, n_kv, n, n_past, params_.n_swa);
    write_input(in.mask_swa, mask.data(), in.mask_swa->nbytes());
  }
  if (in.rope_factors) write_input(in.rope_factors, rope_factors_.data(), in.rope_factors->nbytes());
}

void LlamaModel::set_batch_inputs(const Inputs& in, std::span<const BatchToken> batch, int64_t n_seq) const {
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_kv = in.mask->ne[0];
  const int64_t seq_ctx = n_ctx_ / n_seq;
  if (in.tokens->ne[0] != n || !in.out_rows)
    fail(ErrorKind::invalid_input, "model",
         std::to_string(n) + " batch tokens for inputs of " + std::to_string(in.tokens->ne[0]) +
             (in.out_rows ? "" : " without out_rows"));
  std::vector<int32_t>& tokens = tokens_scratch_;
  std::vector<int32_t>& positions = positions_scratch_;
  std::vector<int32_t>& kv_rows = kv_rows_scratch_;
  std::vector<int32_t>& out_rows = out_rows_scratch_;
  std::vector<float>& mask = mask_scratch_;
  std::vector<float>& mask_swa = mask_swa_scratch_;
  tokens.resize(static_cast<size_t>(n));
  positions.resize(static_cast<size_t>(n));
  kv_rows.resize(static_cast<size_t>(n * params_.n_head_kv));
  mask.assign(static_cast<size_t>(n_kv * n), -INFINITY);
  if (in.mask_swa) mask_swa.assign(static_cast<size_t>(n_kv * n), -INFINITY);
  out_rows.clear();
  // Bidirectional, each sequence's tokens are all of it (positions 0 to
  // its count in this batch), and each sees them all.
  std::vector<int64_t> seq_tokens(params_.causal ? 0 : static_cast<size_t>(std::max<int64_t>(n_seq, 0)), 0);
  for (const BatchToken& b : batch)
    if (!params_.causal && b.seq >= 0 && b.seq < n_seq) ++seq_tokens[static_cast<size_t>(b.seq)];
  for (int64_t i = 0; i < n; ++i) {
    const BatchToken& b = batch[static_cast<size_t>(i)];
    const int64_t base = b.seq * seq_ctx, row = base + b.pos;
    if (!params_.causal &&
        (b.seq < 0 || b.seq >= n_seq || b.pos < 0 || b.pos >= seq_tokens[static_cast<size_t>(b.seq)]))
      fail(ErrorKind::invalid_input, "model",
           params_.arch_name + " attends both ways: sequence " + std::to_string(b.seq) +
               "'s tokens must be all of it, positions from 0 (a token at " + std::to_string(b.pos) + ")");
    tokens[static_cast<size_t>(i)] = b.token;
    positions[static_cast<size_t>(i)] = b.pos;
    for (int64_t h = 0; h < params_.n_head_kv; ++h) kv_rows[static_cast<size_t>(h * n + i)] = static_cast<int32_t>(row);
    // Visible: this sequence's rows up to its own; a window counts back
    // from the token's position.
    float* m = &mask[static_cast<size_t>(i * n_kv)];
    const int64_t last = params_.causal ? row : base + seq_tokens[static_cast<size_t>(b.seq)] - 1;
    std::fill(m + base, m + last + 1, 0.0f);
    if (in.mask_swa) {
      const int64_t first = std::max(base, row - params_.n_swa + 1);
      std::fill(&mask_swa[static_cast<size_t>(i * n_kv + first)], &mask_swa[static_cast<size_t>(i * n_kv + row + 1)],
                0.0f);
    }
    if (b.logits) out_rows.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<int64_t>(out_rows.size()) != in.out_rows->ne[0])
    fail(ErrorKind::invalid_input, "model",
         std::to_string(out_rows.size()) + " tokens ask for logits for inputs of " + std::to_string(in.out_rows->ne[0]));
  tensor_set(*in.tokens, tokens.data(), 0, in.tokens->nbytes());
  tensor_set(*in.positions, positions.data(), 0, in.positions->nbytes());
  tensor_set(*in.kv_rows, kv_rows.data(), 0, in.kv_rows->nbytes());
  write_input(in.mask, mask.data(), in.mask->nbytes());
  if (in.mask_swa) write_input(in.mask_swa, mask_swa.data(), in.mask_swa->nbytes());
  tensor_set(*in.out_rows, out_rows.data(), 0, in.out_rows->nbytes());
  if (in.rope_factors) write_input(in.rope_factors, rope_factors_.data(), in.rope_factors->nbytes());
}

namespace {

// Rope of x [head_dim, heads, n] at the layer's base and scale; the plain op
// when nothing is scaled, so older workers run unscaled models.
Tensor* rope_layer(Context& ctx, const LlamaParams& p, bool swa, Tensor* x, const LlamaModel::Inputs& in) {
  const float base = swa ? p.rope_base_swa : p.rope_base;
  const ops::RopeScaling scaling{swa ? p.rope_freq_scale_swa : p.rope_freq_scale, p.rope_attn_factor};
  const int n_rot = static_cast<int>(p.n_rot);
  if (!in.rope_factors && scaling.freq_scale == 1.f && scaling.attn_factor == 1.f)
    return ops::rope(ctx, x, in.positions, n_rot, p.rope_mode, base);
  return ops::rope_ext(ctx, x, in.positions, in.rope_factors, n_rot, p.rope_mode, base, scaling);
}

// x [head_dim, heads, n] normalized per head (Qwen3, Gemma 3).
Tensor* head_norm(Context& ctx, const LlamaParams& p, Tensor* x, Tensor* w) {
  return w ? ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), w) : x;
}

}  // namespace

namespace {

// The weights and cache of the heads one node group computes: a whole layer
// or one tensor-parallel shard of it.
struct Heads {
  Tensor *wq, *wk, *wv, *wqkv, *bq, *bk, *bv, *wo, *sinks, *q_norm, *k_norm, *k_cache, *v_cache;
  int64_t n_head, n_head_kv;
};

Heads whole_heads(const LlamaParams& p, const LlamaLayer& l) {
  return {l.wq, l.wk, l.wv, l.wqkv, l.bq, l.bk, l.bv, l.wo, l.attn_sinks, l.q_norm, l.k_norm, l.k_cache, l.v_cache,
          p.n_head, p.n_head_kv};
}

Heads shard_heads(const LlamaLayer::Shard& s) {
  return {s.wq, s.wk, s.wv, nullptr, s.bq, s.bk, s.bv, s.wo, s.attn_sinks, s.q_norm, s.k_norm, s.k_cache, s.v_cache,
          s.n_head, s.n_kv};
}

// What flash_attn fuses: q.k scores, soft-cap, mask and soft_max, then
// times the values, transposed into a packed copy. [hd, n_head, n].
Tensor* unfused_attention(Context& ctx, const LlamaParams& p, const Heads& h, Tensor* qh, Tensor* keys,
                          Tensor* v_written, Tensor* mask) {
  const int64_t hd = p.head_dim, n_kv = keys->ne[1];
  // values transposed [n_kv, hd, n_head_kv], packed so its rows are
  // contiguous (init() gives a block-type cache fused attention only).
  const int64_t v_ne[3] = {n_kv, hd, h.n_head_kv};
  const size_t v_nb[3] = {v_written->nb[1], traits(v_written->type).unit_bytes, v_written->nb[2]};
  Tensor* values_t = ops::cont(ctx, ops::view(ctx, v_written, v_ne, v_nb, 0));
  Tensor* kq = ops::mul_mat(ctx, keys, qh);  // [n_kv, n, n_head]
  if (p.attn_softcap > 0) {  // Gemma 2: cap the scaled logits, then mask and softmax
    kq = ops::softcap(ctx, ops::scale(ctx, kq, p.attn_scale), p.attn_softcap);
    kq = ops::soft_max(ctx, kq, mask, 1.0f, h.sinks);
  } else {
    kq = ops::soft_max(ctx, kq, mask, p.attn_scale, h.sinks);  // sinks: one per head, dim 2 of kq
  }
  Tensor* kqv = ops::mul_mat(ctx, values_t, kq);              // [hd, n, n_head]
  return ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3));  // [hd, n_head, n]
}

// The heads' output projection wo · attention(cur): [n_embd, n], whole or
// a shard's partial sum (without bo, the post-norm or the residual).
Tensor* heads_attention(Context& ctx, const LlamaParams& p, bool fused, const Heads& h, int64_t il, Tensor* cur,
                        const LlamaModel::Inputs& in) {
  const int64_t n = cur->ne[1];
  const bool swa = p.is_swa(il);
  const bool ring = swa && in.kv_rows_swa != nullptr;  // the layer's cache is a ring
  const int64_t n_kv = ring ? in.mask_swa->ne[0] : in.mask->ne[0];
  const int64_t hd = p.head_dim;
  const int64_t q_dim = hd * h.n_head, kv_dim = hd * h.n_head_kv;
  const size_t f32 = sizeof(float);

  Tensor *q, *k, *v;
  if (h.wqkv) {  // rows q, then k, then v of one product
    Tensor* qkv = ops::mul_mat(ctx, h.wqkv, cur);  // [q_dim + 2 kv_dim, n]
    const size_t row = qkv->nb[1];
    q = ops::view_3d(ctx, qkv, hd, h.n_head, n, hd * f32, row, 0);
    k = ops::view_3d(ctx, qkv, hd, h.n_head_kv, n, hd * f32, row, static_cast<size_t>(q_dim) * f32);
    v = ops::view_3d(ctx, qkv, hd, h.n_head_kv, n, hd * f32, row, static_cast<size_t>(q_dim + kv_dim) * f32);
  } else {
    q = ops::mul_mat(ctx, h.wq, cur);
    k = ops::mul_mat(ctx, h.wk, cur);
    v = ops::mul_mat(ctx, h.wv, cur);
    if (h.bq) q = ops::add(ctx, q, h.bq);
    if (h.bk) k = ops::add(ctx, k, h.bk);
    if (h.bv) v = ops::add(ctx, v, h.bv);
    q = ops::reshape(ctx, q, {hd, h.n_head, n});
    k = ops::reshape(ctx, k, {hd, h.n_head_kv, n});
    v = ops::reshape(ctx, v, {hd, h.n_head_kv, n});
  }
  q = head_norm(ctx, p, q, h.q_norm);
  k = head_norm(ctx, p, k, h.k_norm);
  if (p.n_rot > 0) {  // an encoder's positions are in its embeddings
    q = rope_layer(ctx, p, swa, q, in);
    k = rope_layer(ctx, p, swa, k, in);
  }

  // Write the new rows (each kv head's [hd, n] into its rows of the cache
  // [hd, n_ctx, n_head_kv]), then read [0, n_kv) through views of the
  // writes so the graph orders each read after its write. Every kv head
  // writes the same rows: a shard reads the first of the input's columns.
  Tensor* rows = ring ? in.kv_rows_swa : in.kv_rows;
  if (rows->ne[1] != h.n_head_kv) rows = ops::view_2d(ctx, rows, n, h.n_head_kv, rows->nb[1], 0);
  Tensor* k_written = ops::set_rows(ctx, h.k_cache, ops::permute(ctx, k, 0, 2, 1, 3), rows);
  Tensor* v_written = ops::set_rows(ctx, h.v_cache, ops::permute(ctx, v, 0, 2, 1, 3), rows);
  // keys [hd, n_kv, n_head_kv]: a of mul_mat, kv heads in dim 2 (GQA
  // broadcast); the first n_kv rows of each head.
  const int64_t k_ne[3] = {hd, n_kv, h.n_head_kv};
  const size_t k_nb[3] = {traits(h.k_cache->type).unit_bytes, h.k_cache->nb[1], h.k_cache->nb[2]};
  Tensor* keys = ops::view(ctx, k_written, k_ne, k_nb, 0);
  Tensor* qh = ops::permute(ctx, q, 0, 2, 1, 3);  // [hd, n, n_head]
  Tensor* mask = swa ? in.mask_swa : in.mask;
  Tensor* kqv;
  if (fused) {
    // values [hd, n_kv, n_head_kv]: the cache's rows as they are.
    Tensor* values = ops::view(ctx, v_written, k_ne, k_nb, 0);
    kqv = ops::flash_attn(ctx, qh, keys, values, mask, p.attn_scale, p.attn_softcap, h.sinks);  // [hd, n_head, n]
  } else {
    kqv = unfused_attention(ctx, p, h, qh, keys, v_written, mask);
  }
  kqv = ops::reshape(ctx, kqv, {q_dim, n});
  return ops::mul_mat(ctx, h.wo, kqv);
}

}  // namespace

Tensor* LlamaModel::build_attention(Context& ctx, Graph& g, Forward& f, const LlamaLayer& l, int64_t il, Tensor* cur,
                                    const Inputs& in) const {
  const LlamaParams& p = params_;
  if (p.mla()) return detail::build_mla_attention(ctx, p, l, cur, in, layout_.fused_attention);
  Tensor* out;
  if (l.shards.empty()) {
    out = heads_attention(ctx, p, layout_.fused_attention, whole_heads(p, l), il, cur, in);
  } else {
    const detail::ShardSum where{layer_part(il), layout_.partials_meet_for(layer_part(il)), layout_.partials_type};
    out = detail::sum_shards(ctx, g, l.shards, where, cur, f.part_nodes, [&](const LlamaLayer::Shard& s, Tensor* x) {
      if (s.n_kv == 0) return static_cast<Tensor*>(nullptr);  // feed-forward columns only
      return heads_attention(ctx, p, layout_.fused_attention, shard_heads(s), il, x, in);
    });
  }
  if (l.bo) out = ops::add(ctx, out, l.bo);
  if (l.attn_post_norm) out = ops::mul(ctx, ops::rms_norm(ctx, out, p.rms_eps), l.attn_post_norm);
  return out;
}
}  // namespace weft::model
