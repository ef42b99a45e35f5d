// LlamaModel: a model's weights and KV cache described as tensors, cut by
// its layout, and its forward graph.
#include <algorithm>
#include <cmath>
#include <string>

#include "model/llama_ffn.h"
#include "model/llama_weights.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/model/model.h"

namespace weft::model {
namespace {

constexpr const char* kLlamaModelWhere = "model";

}  // namespace

LlamaModel::LlamaModel(const GgufFile& file, int64_t n_ctx, const ModelLayout& layout)
    : params_(LlamaParams::from_gguf(file)), n_ctx_(n_ctx), layout_(layout) {
  detail::check_n_ctx(n_ctx_);
  const LlamaParams& p = params_;
  if (p.encoder && n_ctx_ > p.n_ctx_train)
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "a context of " + std::to_string(n_ctx_) + " positions exceeds " + p.arch_name + "'s " +
             std::to_string(p.n_ctx_train) + " position embeddings");
  if (layout_.layer_bounds.empty()) layout_.layer_bounds = {0, p.n_layer};
  layer_part_ = detail::layer_parts(layout_.layer_bounds, p.n_layer);
  n_parts_ = static_cast<int>(layout_.layer_bounds.size() - 1);
  check_cache_type(p, layout_.cache_type);
  // The unfused products read the values transposed, which a block type
  // cannot be: a quantized cache is attended to by flash_attn only.
  if (layout_.cache_type != DType::f16 && !layout_.fused_attention)
    fail(ErrorKind::unsupported, kLlamaModelWhere,
         "a " + std::string(dtype_name(layout_.cache_type)) + " KV cache needs fused attention");
  if (!layout_.routes_rows.empty() && layout_.routes_rows.size() != static_cast<size_t>(n_parts_))
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "routes_rows has " + std::to_string(layout_.routes_rows.size()) + " entries for " + std::to_string(n_parts_) +
             " parts");

  weights_ = std::make_unique<detail::ModelWeights>(detail::describe_weights(file, p, ctx_));
  detail::ModelWeights& w = *weights_;
  if (!layout_.expert_split.empty())
    detail::split_experts(w, p, layout_.expert_split, static_cast<size_t>(n_parts_), ctx_);
  if (!layout_.tensor_shares.empty()) {
    if (layout_.tensor_shares.size() != static_cast<size_t>(n_parts_))
      fail(ErrorKind::invalid_input, kLlamaModelWhere,
           "tensor_shares has " + std::to_string(layout_.tensor_shares.size()) + " entries for " +
               std::to_string(n_parts_) + " parts");
    detail::split_tensor_parallel(w, p, layer_part_, layout_.tensor_shares, ctx_);
  }
  tok_embd_ = w.tok_embd;
  type_embd_ = w.type_embd;
  pos_embd_ = w.pos_embd;
  embd_norm_ = w.embd_norm;
  embd_norm_b_ = w.embd_norm_b;
  output_norm_ = w.output_norm;
  output_ = w.output;
  layers_ = w.layers;
  output_slices_ = w.output_slices;
  output_part_ = w.output_part;
  rope_factors_ = detail::rope_factors(file, p, n_ctx_);
  part_weights_ = detail::weights_by_part(w, layer_part_, n_parts_);

  // KV caches; sliding layers keep a ring where it is smaller
  // (LoadOptions::sliding_ring_step).
  if (layout_.sliding_ring_step < 0)
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "sliding_ring_step " + std::to_string(layout_.sliding_ring_step) + " is negative");
  ring_rows_ = model::sliding_ring_rows(p, n_ctx_, layout_.sliding_ring_step);
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = layers_[static_cast<size_t>(i)];
    const int64_t rows = ring_rows_ > 0 && p.is_swa(i) ? ring_rows_ : n_ctx_;
    for (LlamaLayer::Shard& sh : l.shards) {  // each shard its heads' rows
      if (sh.n_kv == 0) continue;             // feed-forward columns only
      const std::string at = std::to_string(i) + ".part" + std::to_string(sh.part);
      sh.k_cache = ctx_.new_tensor(layout_.cache_type, {p.head_dim, rows, sh.n_kv});
      sh.k_cache->name = "cache_k." + at;
      sh.v_cache = ctx_.new_tensor(layout_.cache_type, {p.head_dim, rows, sh.n_kv});
      sh.v_cache->name = "cache_v." + at;
    }
    if (!l.shards.empty()) continue;
    l.k_cache = ctx_.new_tensor(layout_.cache_type, {p.head_dim, rows, p.n_head_kv});
    l.k_cache->name = "cache_k." + std::to_string(i);
    if (p.mla()) continue;  // the latent is both: values are views of k_cache
    l.v_cache = ctx_.new_tensor(layout_.cache_type, {p.head_dim, rows, p.n_head_kv});
    l.v_cache->name = "cache_v." + std::to_string(i);
  }
}

LlamaModel::~LlamaModel() = default;

std::vector<Tensor*> LlamaModel::part_caches(int part) const {
  std::vector<Tensor*> caches;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const LlamaLayer::Shard& s : layers_[i].shards)
      if (s.part == part && s.k_cache != nullptr) caches.insert(caches.end(), {s.k_cache, s.v_cache});
    if (layer_part_[i] != part || !layers_[i].k_cache) continue;
    caches.push_back(layers_[i].k_cache);
    if (layers_[i].v_cache) caches.push_back(layers_[i].v_cache);
  }
  return caches;
}

std::vector<std::unique_ptr<Buffer>> LlamaModel::load_part_weights(const GgufFile& file, int part, Device& device,
                                                                   bool map, const LoadProgress& progress,
                                                                   size_t& done, size_t total,
                                                                   size_t& mapped_bytes) const {
  const std::vector<Tensor*>& weights = part_weights(part);
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<Tensor*> copied = weights;
  if (map) {
    if (auto mapped = detail::map_weights(file, *weights_, device, weights); !mapped.empty()) {
      // Weights made at load (ModelWeights::derived) are not in the file's
      // mapping: copied into a buffer of their own.
      size_t part_bytes = 0;
      copied.clear();
      for (Tensor* t : weights) {
        if (t->buffer == nullptr)
          copied.push_back(t);
        else
          part_bytes += t->nbytes();
      }
      mapped_bytes += part_bytes;
      done += part_bytes;
      if (progress) progress(std::min(done, total), total);
      bufs = std::move(mapped);
    }
  }
  if (auto own = allocate_tensors(device.default_buffer_type(), copied)) {
    own->set_usage(BufferUsage::weights);
    for (Tensor* t : copied) {
      tensor_set(*t, weights_->data(file, *t), 0, t->nbytes());
      weights_->release(t);  // a derived weight's host bytes: on the device now
      done += t->nbytes();
      if (progress) progress(done, total);
    }
    bufs.push_back(std::move(own));
  }
  return bufs;
}

LlamaModel::Forward LlamaModel::build_forward(Context& ctx, Graph& g, const Inputs& in, int64_t n_past,
                                              LogitRows rows) const {
  const LlamaParams& p = params_;
  const int64_t n = in.tokens->ne[0];
  const int64_t n_kv = in.mask->ne[0];  // n_past + n, padded (padded_kv)
  if (n <= 0 || n_past < 0 || n_kv < n_past + n || n_kv > n_ctx_)
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "tokens [" + std::to_string(n_past) + ", " + std::to_string(n_kv) + ") do not fit the context of " +
             std::to_string(n_ctx_));
  if (in.positions->ne[0] != n || in.mask->ne[1] < n)
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "positions " + shape_string(*in.positions) + " or mask " + shape_string(*in.mask) + " do not fit " +
             std::to_string(n) + " tokens after " + std::to_string(n_past));
  if ((p.any_swa() && !in.mask_swa) || (!rope_factors_.empty() && !in.rope_factors))
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "the inputs lack the sliding-window mask or rope factors (new_inputs)");

  if (p.encoder) return build_encoder_forward(ctx, g, in, n_past, rows);
  Forward f;
  f.segment_begin.push_back(ctx.size());
  Tensor* x = ops::get_rows(ctx, tok_embd_, in.tokens);  // [n_embd, n]
  if (p.embed_scale) x = ops::scale(ctx, x, std::sqrt(static_cast<float>(p.n_embd)));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const LlamaLayer& l = layers_[static_cast<size_t>(il)];
    f.segment_begin.push_back(ctx.size());
    Tensor* cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.attn_norm);
    x = ops::add(ctx, x, build_attention(ctx, g, f, l, il, cur, in));
    cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.ffn_norm);
    const int part = layer_part_[static_cast<size_t>(il)];
    const bool routed_rows = !layout_.routes_rows.empty() && layout_.routes_rows[static_cast<size_t>(part)] != 0;
    if (l.shards.empty() || l.ffn_gate_inp != nullptr)  // whole, or a mixture of experts (never sharded)
      cur = detail::build_ffn(ctx, g, p, l, cur, {part, layout_.experts_overlap, routed_rows, &f.part_nodes});
    else
      cur = detail::build_ffn_shards(ctx, g, p, l, cur, {part, layout_.partials_meet_for(part), layout_.partials_type},
                                     f.part_nodes);
    if (l.ffn_post_norm) cur = ops::mul(ctx, ops::rms_norm(ctx, cur, p.rms_eps), l.ffn_post_norm);
    x = ops::add(ctx, x, cur);
  }
  f.segment_begin.push_back(ctx.size());
  if (rows == LogitRows::none) {  // the KV cache only: the last layer's output ends the graph
    x->name = "last_layer_out";
    g.expand(x);
    f.output_index = ctx.size();
    f.logits = x;
    return f;
  }
  if (in.out_rows)
    x = ops::get_rows(ctx, x, in.out_rows);  // [n_embd, n_out]
  else if (rows == LogitRows::last && n > 1)
    x = ops::view_2d(ctx, x, p.n_embd, 1, x->nb[1], (n - 1) * x->nb[1]);
  x = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), output_norm_);
  f.output_index = ctx.size();
  if (rows == LogitRows::hidden) {  // embeddings: the normed rows are the output
    x->name = "hidden";
    g.expand(x);
    f.logits = x;
    return f;
  }
  Tensor* logits = output_split() ? build_output_slices(ctx, g, f, x)
                                  : ops::mul_mat(ctx, output_, x);  // [n_vocab, n] or [n_vocab, 1]
  if (p.final_softcap > 0) logits = ops::softcap(ctx, logits, p.final_softcap);
  logits->name = "logits";
  g.expand(logits);
  f.logits = logits;
  return f;
}

Tensor* LlamaModel::build_output_slices(Context& ctx, Graph& g, Forward& f, Tensor* x) const {
  g.expand(x);
  std::vector<Tensor*> products(output_slices_.size(), nullptr);
  for (const bool home_pass : {false, true}) {  // other parts' commands go out first
    for (size_t i = 0; i < output_slices_.size(); ++i) {
      const OutputSlice& o = output_slices_[i];
      if ((o.part == output_part_) != home_pass) continue;
      const size_t begin = ctx.size();
      Tensor* rows = o.w ? o.w
                         : ops::view_2d(ctx, tok_embd_, params_.n_embd, o.count, tok_embd_->nb[1],
                                        static_cast<size_t>(o.first) * tok_embd_->nb[1]);
      products[i] = ops::mul_mat(ctx, rows, x);  // [count, n]
      if (!home_pass) f.part_nodes.push_back({begin, ctx.size(), o.part});
      g.expand(products[i]);
    }
  }
  Tensor* logits = products.front();
  for (size_t i = 1; i < products.size(); ++i) logits = ops::concat(ctx, logits, products[i], 0);
  return logits;
}

void fill_causal_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past, int64_t window) {
  if (n_kv < 0 || n < 0 || static_cast<uint64_t>(n_kv) * static_cast<uint64_t>(n) != mask.size())
    fail(ErrorKind::invalid_input, kLlamaModelWhere,
         "mask of " + std::to_string(mask.size()) + " floats is not [" + std::to_string(n_kv) + ", " +
             std::to_string(n) + "]");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = n_past + i;
    for (int64_t j = 0; j < n_kv; ++j) {
      const bool visible = j <= p && (window <= 0 || p - j < window);
      mask[static_cast<size_t>(i * n_kv + j)] = visible ? 0.0f : -INFINITY;
    }
  }
}

int greedy(const float* logits, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace weft::model
