// LlamaModel: weights and KV cache on one device, and the forward graph.
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

constexpr const char* kWhere = "model";

Device& first_device(std::span<const LayerPlacement> placement) {
  if (placement.empty() || !placement.front().device)
    fail(ErrorKind::invalid_input, kWhere, "a split model needs at least one placement with a device");
  return *placement.front().device;
}

}  // namespace

LlamaModel::LlamaModel(const GgufFile& file, Device& device, int64_t n_ctx, const LoadProgress& progress,
                       const LoadOptions& options)
    : params_(LlamaParams::from_gguf(file)), device_(device), n_ctx_(n_ctx) {
  const LayerPlacement one{&device, 0, params_.n_layer};
  init(file, {&one, 1}, progress, options);
  backends_.push_back(device.create_backend());
  galloc_ = std::make_unique<GraphAllocator>(std::vector<BufferType*>{&device.default_buffer_type()});
}

LlamaModel::LlamaModel(const GgufFile& file, std::span<const LayerPlacement> placement, int64_t n_ctx,
                       const LoadProgress& progress, const LoadOptions& options)
    : params_(LlamaParams::from_gguf(file)), device_(first_device(placement)), n_ctx_(n_ctx) {
  init(file, placement, progress, options);
  std::vector<Backend*> list;
  for (const LayerPlacement& pl : placement) list.push_back(backends_.emplace_back(pl.device->create_backend()).get());
  int stages = 0;
  for (const LayerPlacement& pl : placement) stages += pl.first < pl.last ? 1 : 0;
  SchedulerOptions so;
  if (stages >= 2) {
    // One memory set per stage (at most 4): micro-batch i + 1 of a prompt,
    // or another slot's step, is placed while i is in flight.
    so.n_copies = std::min(stages, 4);
    if (options.pipeline_micro_batch > 0) micro_batch_ = options.pipeline_micro_batch;
    if (ring_rows_ > 0) micro_batch_ = std::min(micro_batch_, ring_step_);  // a micro-batch is one ring step
  }
  n_copies_ = so.n_copies;
  sched_ = std::make_unique<Scheduler>(list, so);
}

void LlamaModel::init(const GgufFile& file, std::span<const LayerPlacement> placement, const LoadProgress& progress,
                      const LoadOptions& options) {
  detail::check_n_ctx(n_ctx_);
  const LlamaParams& p = params_;

  // Each layer's placement: ranges in order, without gaps, covering every layer.
  std::vector<int64_t> bounds{0};
  for (size_t i = 0; i < placement.size(); ++i) {
    if (!placement[i].device)
      fail(ErrorKind::invalid_input, kWhere, "placement " + std::to_string(i) + " has no device");
    if (placement[i].first != bounds.back())
      fail(ErrorKind::invalid_input, kWhere,
           "placement " + std::to_string(i) + " [" + std::to_string(placement[i].first) + ", " +
               std::to_string(placement[i].last) + ") does not continue at layer " + std::to_string(bounds.back()) +
               " of " + std::to_string(p.n_layer));
    bounds.push_back(placement[i].last);
  }
  layer_part_ = detail::layer_parts(bounds, p.n_layer);
  n_parts_ = static_cast<int>(placement.size());
  detail::check_cache_type(p, options.cache_type);
  cache_type_ = options.cache_type;
  fused_attention_ = options.fused_attention;
  for (const LayerPlacement& pl : placement)
    if (fused_attention_ && pl.first < pl.last)
      fused_attention_ = detail::runs_flash_attn(*pl.device, p, cache_type_);
  // The unfused products read the values transposed, which a block type
  // cannot be: a quantized cache is attended to by flash_attn only.
  if (cache_type_ != DType::f16 && !fused_attention_)
    fail(ErrorKind::unsupported, kWhere,
         "a " + std::string(dtype_name(cache_type_)) + " KV cache needs fused attention, which " +
             (options.fused_attention ? "a device of the placement does not run (an older worker?)"
                                      : std::string("LoadOptions::fused_attention turns off")));

  detail::ModelWeights w = detail::describe_weights(file, p, weights_ctx_);
  if (!options.expert_split.empty()) {
    detail::split_experts(w, p, options.expert_split, placement.size(), weights_ctx_);
    for (const LayerPlacement& pl : placement)
      routes_rows_.push_back(options.experts_routed_rows && detail::runs_routed_rows(*pl.device, p) ? 1 : 0);
  }
  experts_overlap_ = options.experts_overlap;
  tok_embd_ = w.tok_embd;
  output_norm_ = w.output_norm;
  output_ = w.output;
  layers_ = w.layers;
  rope_factors_ = detail::rope_factors(file, p, n_ctx_);
  const std::vector<std::vector<Tensor*>> weights = detail::weights_by_part(w, layer_part_, n_parts_);

  // One weights buffer per placement: the file's mapped bytes in place, or
  // filled from the file.
  size_t total = 0, done = 0;
  for (const auto& part : weights)
    for (const Tensor* t : part) total += t->nbytes();
  for (int i = 0; i < n_parts_; ++i) {
    Device& device = *placement[static_cast<size_t>(i)].device;
    BufferType& bt = device.default_buffer_type();
    if (options.map_weights) {
      if (auto mapped = detail::map_weights(file, w, device, weights[static_cast<size_t>(i)]); !mapped.empty()) {
        // Weights made at load (ModelWeights::derived) are not in the file's
        // mapping: copied into a buffer of their own.
        size_t part_bytes = 0;
        std::vector<Tensor*> rest;
        for (Tensor* t : weights[static_cast<size_t>(i)]) {
          if (t->buffer == nullptr)
            rest.push_back(t);
          else
            part_bytes += t->nbytes();
        }
        mapped_weight_bytes_ += part_bytes;
        done += part_bytes;
        if (progress) progress(std::min(done, total), total);
        for (auto& b : mapped) bufs_.push_back(std::move(b));
        if (auto own = allocate_tensors(bt, rest)) {
          own->set_usage(BufferUsage::weights);
          for (Tensor* t : rest) {
            tensor_set(*t, w.data(file, *t), 0, t->nbytes());
            done += t->nbytes();
            if (progress) progress(done, total);
          }
          bufs_.push_back(std::move(own));
        }
        continue;
      }
    }
    auto buf = allocate_tensors(bt, weights[static_cast<size_t>(i)]);
    if (!buf) continue;
    buf->set_usage(BufferUsage::weights);
    for (Tensor* t : weights[static_cast<size_t>(i)]) {
      tensor_set(*t, w.data(file, *t), 0, t->nbytes());
      done += t->nbytes();
      if (progress) progress(done, total);
    }
    bufs_.push_back(std::move(buf));
  }

  // One zeroed KV cache buffer per placement; sliding layers keep a ring
  // where it is smaller (LoadOptions::sliding_ring_step).
  if (options.sliding_ring_step < 0)
    fail(ErrorKind::invalid_input, kWhere,
         "sliding_ring_step " + std::to_string(options.sliding_ring_step) + " is negative");
  ring_rows_ = model::sliding_ring_rows(p, n_ctx_, options.sliding_ring_step);
  ring_step_ = options.sliding_ring_step;
  std::vector<std::vector<Tensor*>> caches(static_cast<size_t>(n_parts_));
  for (int64_t i = 0; i < p.n_layer; ++i) {
    LlamaLayer& l = layers_[static_cast<size_t>(i)];
    const int64_t rows = ring_rows_ > 0 && p.is_swa(i) ? ring_rows_ : n_ctx_;
    auto& c = caches[static_cast<size_t>(layer_part_[static_cast<size_t>(i)])];
    l.k_cache = weights_ctx_.new_tensor(cache_type_, {p.head_dim, rows, p.n_head_kv});
    l.k_cache->name = "cache_k." + std::to_string(i);
    c.push_back(l.k_cache);
    if (p.mla()) continue;  // the latent is both: values are views of k_cache
    l.v_cache = weights_ctx_.new_tensor(cache_type_, {p.head_dim, rows, p.n_head_kv});
    l.v_cache->name = "cache_v." + std::to_string(i);
    c.push_back(l.v_cache);
  }
  for (int i = 0; i < n_parts_; ++i) {
    auto buf = allocate_tensors(placement[static_cast<size_t>(i)].device->default_buffer_type(),
                                caches[static_cast<size_t>(i)]);
    if (!buf) continue;
    buf->clear(0);
    bufs_.push_back(std::move(buf));
  }
}

LlamaModel::~LlamaModel() {
  // Work an eval left in flight (it threw after submitting) must finish
  // before the compute and weight buffers it uses are freed.
  for (const auto& b : backends_) {
    try {
      b->synchronize();
    } catch (const Error&) {  // its error was reported, or the peer is gone
    }
  }
}

LlamaModel::Forward LlamaModel::build_forward(Context& ctx, Graph& g, const Inputs& in, int64_t n_past,
                                              LogitRows rows) {
  const LlamaParams& p = params_;
  const int64_t n = in.tokens->ne[0];
  const int64_t n_kv = in.mask->ne[0];  // n_past + n, padded (padded_kv)
  if (n <= 0 || n_past < 0 || n_kv < n_past + n || n_kv > n_ctx_)
    fail(ErrorKind::invalid_input, kWhere,
         "tokens [" + std::to_string(n_past) + ", " + std::to_string(n_kv) + ") do not fit the context of " +
             std::to_string(n_ctx_));
  if (in.positions->ne[0] != n || in.mask->ne[1] < n)
    fail(ErrorKind::invalid_input, kWhere,
         "positions " + shape_string(*in.positions) + " or mask " + shape_string(*in.mask) + " do not fit " +
             std::to_string(n) + " tokens after " + std::to_string(n_past));
  if ((p.any_swa() && !in.mask_swa) || (!rope_factors_.empty() && !in.rope_factors))
    fail(ErrorKind::invalid_input, kWhere, "the inputs lack the sliding-window mask or rope factors (new_inputs)");

  Forward f;
  f.segment_begin.push_back(ctx.size());
  Tensor* x = ops::get_rows(ctx, tok_embd_, in.tokens);  // [n_embd, n]
  if (p.embed_scale) x = ops::scale(ctx, x, std::sqrt(static_cast<float>(p.n_embd)));
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const LlamaLayer& l = layers_[static_cast<size_t>(il)];
    f.segment_begin.push_back(ctx.size());
    Tensor* cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.attn_norm);
    x = ops::add(ctx, x, build_attention(ctx, l, il, cur, in));
    cur = ops::mul(ctx, ops::rms_norm(ctx, x, p.rms_eps), l.ffn_norm);
    const int part = layer_part_[static_cast<size_t>(il)];
    const bool routed_rows = !routes_rows_.empty() && routes_rows_[static_cast<size_t>(part)] != 0;
    cur = detail::build_ffn(ctx, g, p, l, cur, {part, experts_overlap_, routed_rows, &f.expert_nodes});
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
  Tensor* logits = ops::mul_mat(ctx, output_, x);  // [n_vocab, n] or [n_vocab, 1]
  if (p.final_softcap > 0) logits = ops::softcap(ctx, logits, p.final_softcap);
  logits->name = "logits";
  g.expand(logits);
  f.logits = logits;
  return f;
}

void LlamaModel::check_idle() const {
  for (char busy : slot_in_flight_)
    if (busy) fail(ErrorKind::invalid_input, kWhere, "an eval while a submit_batch step is in flight (finish_batch first)");
}

void LlamaModel::check_tokens(std::span<const int32_t> tokens, int64_t n_past) const {
  check_idle();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail(ErrorKind::invalid_input, kWhere, "eval needs at least one token");
  if (n_past < 0 || n_past > n_ctx_ || n > n_ctx_ - n_past)
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(n) + " tokens after " + std::to_string(n_past) + " do not fit the context of " +
             std::to_string(n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= params_.n_vocab)
      fail(ErrorKind::invalid_input, kWhere,
           "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(params_.n_vocab));
}

namespace {

// The KV length a graph reads: n_kv rounded up to a multiple of 32 (at most
// n_ctx), masked beyond n_kv, so that consecutive tokens build graphs of the
// same shape and a worker's graph cache hits 31 times out of 32.
int64_t padded_kv(int64_t n_kv, int64_t n_ctx) {
  constexpr int64_t kPad = 32;
  return std::min(n_ctx, (n_kv + kPad - 1) / kPad * kPad);
}

}  // namespace

// One eval's graph: its inputs and its logits, an output [n_vocab, n] (or
// [n_vocab, 1]). It depends only on the token count, the (padded) KV length
// and the logit rows: positions, masks and token ids are inputs, so the
// graph serves every eval of that shape (LlamaModel::eval keeps the last).
struct LlamaModel::EvalGraph {
  Context ctx;
  Graph g;
  int64_t n;
  int64_t n_kv;
  LogitRows rows;
  int64_t n_out;  // > 0: a batch's graph (out_rows)
  LlamaModel::Inputs in;
  LlamaModel::Forward forward;
  Tensor* logits;

  EvalGraph(LlamaModel& m, int64_t n_tokens, int64_t kv, LogitRows logit_rows, int64_t n_out_rows)
      : n(n_tokens),
        n_kv(kv),
        rows(logit_rows),
        n_out(n_out_rows),
        in(m.new_inputs(ctx, n_tokens, kv, n_out_rows)),
        forward(m.build_forward(ctx, g, in, kv - n_tokens, logit_rows)),
        logits(forward.logits) {
    logits->flags |= kFlagOutput;
  }
};

// The graph for n tokens reading n_kv cache rows: the last one when its
// shape matches (and reuse is on), else a new one, allocated (and, split,
// pinned segment by segment to its placements' backends).
LlamaModel::EvalGraph& LlamaModel::graph_for(int64_t n, int64_t n_kv, LogitRows rows, int64_t n_out) {
  if (rows == LogitRows::last && n == 1) rows = LogitRows::all;  // the same graph
  if (n_out > 0) rows = LogitRows::all;  // out_rows decides
  if (graph_ && reuse_graphs_ && graph_->n == n && graph_->n_kv == n_kv && graph_->rows == rows &&
      graph_->n_out == n_out) {
    // Split, its memory set may have gone to a micro-batch or a slot since:
    // placed again, with its pins.
    if (sched_ && !sched_->holds(graph_->g)) {
      pin_segments(*graph_);
      sched_->allocate(graph_->g);
    }
    return *graph_;
  }
  // Kept only once allocated: a graph whose allocation threw must not be
  // found again by the next eval of its shape.
  graph_.reset();
  auto fresh = std::make_unique<EvalGraph>(*this, n, n_kv, rows, n_out);
  EvalGraph& e = *fresh;
  if (!sched_) {
    galloc_->allocate(e.g, GraphLayout{});
    graph_ = std::move(fresh);
    return e;
  }
  pin_segments(e);
  // A new graph is always allocated anew (compute_async alone would take a
  // graph at a freed graph's address for the freed one).
  sched_->allocate(e.g);
  graph_ = std::move(fresh);
  return e;
}

void LlamaModel::pin_segments(EvalGraph& e) {
  const std::vector<size_t>& begin = e.forward.segment_begin;  // n_layer + 2
  auto& tensors = e.ctx.tensors();
  for (size_t s = 0; s < begin.size(); ++s) {
    const size_t end = s + 1 < begin.size() ? begin[s + 1] : e.ctx.size();
    const int part = s == 0 ? 0 : s + 1 == begin.size() ? n_parts_ - 1 : layer_part_[s - 1];
    for (size_t i = begin[s]; i < end; ++i) {
      Tensor& t = tensors[i];
      if (t.op == Op::none || !e.g.contains(&t)) continue;
      // A tied output product (and the soft-cap after it) runs where the
      // embedding is, rather than copying the embedding to the last device.
      if (output_ == tok_embd_ && i >= e.forward.output_index) continue;
      sched_->set_backend(t, *backends_[static_cast<size_t>(part)]);
    }
  }
  // An expert slice runs where its weights are, not on its layer's device.
  for (const NodeRange& r : e.forward.expert_nodes)
    for (size_t i = r.begin; i < r.end; ++i)
      if (tensors[i].op != Op::none && e.g.contains(&tensors[i]))
        sched_->set_backend(tensors[i], *backends_[static_cast<size_t>(r.part)]);
}

std::vector<float> LlamaModel::eval(std::span<const int32_t> tokens, int64_t n_past, LogitRows rows) {
  std::vector<float> logits;
  eval(tokens, n_past, logits, rows);
  return logits;
}

void LlamaModel::eval(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits, LogitRows rows) {
  check_tokens(tokens, n_past);
  const int64_t n = static_cast<int64_t>(tokens.size());
  check_ring(n_past, n);
  if (sched_ && micro_batch_ > 0 && n > micro_batch_ && rows != LogitRows::all) {
    eval_pipelined(tokens, n_past, logits, rows);
    return;
  }
  if (ring_rows_ > 0 && n > ring_step_) {
    eval_steps(tokens, n_past, logits, rows);
    return;
  }
  EvalGraph& e = graph_for(n, padded_kv(n_past + n, n_ctx_), rows);
  set_inputs(e.in, tokens, n_past);
  run_graph(e, logits);
}

// A ring (see LoadOptions::sliding_ring_step) holds the window before the
// next position written as long as every eval writes at most ring_step_
// positions after the last: row p mod R then still holds p for each p of a
// query's window. Going back to n_past > 0 (a reused prefix) needs the
// window before it, positions [n_past - n_swa + 1, n_past), none of them
// overwritten since: each p there with p + R beyond the highest position
// written is intact. Going back to 0 needs nothing.
void LlamaModel::check_ring(int64_t n_past, int64_t n) {
  if (ring_rows_ == 0) return;
  if (n_past == 0) ring_high_ = 0;
  const int64_t oldest = std::max<int64_t>(0, n_past - params_.n_swa + 1);
  if (n_past < ring_high_ && oldest + ring_rows_ < ring_high_)
    fail(ErrorKind::invalid_input, kWhere,
         "an eval from position " + std::to_string(n_past) + " after positions up to " +
             std::to_string(ring_high_ - 1) + " were written: the sliding-window ring of " +
             std::to_string(ring_rows_) + " rows no longer holds positions from " + std::to_string(oldest) +
             " (evaluate from 0, or load with LoadOptions::sliding_ring_step = 0)");
  ring_high_ = std::max(ring_high_, n_past + n);
}

void LlamaModel::check_no_ring(const char* what) const {
  if (ring_rows_ > 0)
    fail(ErrorKind::invalid_input, kWhere,
         std::string(what) + " over sequences needs full KV caches, and this model keeps a sliding-window ring of " +
             std::to_string(ring_rows_) + " rows (load with LoadOptions::sliding_ring_step = 0)");
}

void LlamaModel::eval_steps(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                            LogitRows rows) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> part;
  logits.clear();
  for (int64_t done = 0; done < n; done += ring_step_) {
    const int64_t m = std::min(ring_step_, n - done);
    const bool last = done + m == n;
    const LogitRows step_rows = rows == LogitRows::all ? LogitRows::all : last ? rows : LogitRows::none;
    EvalGraph& e = graph_for(m, padded_kv(n_past + done + m, n_ctx_), step_rows);
    set_inputs(e.in, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)), n_past + done);
    run_graph(e, part);
    if (rows == LogitRows::all)
      logits.insert(logits.end(), part.begin(), part.end());
    else if (last)
      logits.swap(part);
  }
}

std::pair<int64_t, int64_t> LlamaModel::check_batch(std::span<const BatchToken> batch, int64_t n_seq) const {
  check_no_ring("a batch");
  if (batch.empty()) fail(ErrorKind::invalid_input, kWhere, "eval_batch needs at least one token");
  if (n_seq <= 0 || n_seq > n_ctx_ || n_ctx_ % n_seq != 0)
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(n_seq) + " sequences do not divide the context of " + std::to_string(n_ctx_));
  const int64_t seq_ctx = n_ctx_ / n_seq;
  int64_t n_out = 0, top = 0;
  for (const BatchToken& b : batch) {
    if (b.seq < 0 || b.seq >= n_seq || b.pos < 0 || b.pos >= seq_ctx)
      fail(ErrorKind::invalid_input, kWhere,
           "token at position " + std::to_string(b.pos) + " of sequence " + std::to_string(b.seq) + " is outside " +
               std::to_string(n_seq) + " sequences of " + std::to_string(seq_ctx) + " positions");
    if (b.token < 0 || b.token >= params_.n_vocab)
      fail(ErrorKind::invalid_input, kWhere,
           "token id " + std::to_string(b.token) + " is outside the vocabulary of " + std::to_string(params_.n_vocab));
    n_out += b.logits ? 1 : 0;
    top = std::max(top, b.seq * seq_ctx + b.pos + 1);
  }
  if (n_out == 0) fail(ErrorKind::invalid_input, kWhere, "no token of the batch asks for logits");
  return {n_out, top};
}

void LlamaModel::eval_batch(std::span<const BatchToken> batch, int64_t n_seq, std::vector<float>& logits) {
  check_idle();
  const auto [n_out, top] = check_batch(batch, n_seq);
  const int64_t n = static_cast<int64_t>(batch.size());
  EvalGraph& e = graph_for(n, padded_kv(top, n_ctx_), LogitRows::all, n_out);
  set_batch_inputs(e.in, batch, n_seq);
  run_graph(e, logits);
}

int LlamaModel::batch_slots() const { return sched_ ? n_copies_ : 1; }

void LlamaModel::submit_batch(int slot, std::span<const BatchToken> batch, int64_t n_seq) {
  if (slot < 0 || slot >= batch_slots())
    fail(ErrorKind::invalid_input, kWhere,
         "slot " + std::to_string(slot) + " is outside [0, " + std::to_string(batch_slots()) + ")");
  const size_t k = static_cast<size_t>(slot);
  slot_graphs_.resize(static_cast<size_t>(batch_slots()));
  slot_in_flight_.resize(slot_graphs_.size());
  slot_logits_.resize(slot_graphs_.size());
  if (slot_in_flight_[k])
    fail(ErrorKind::invalid_input, kWhere, "slot " + std::to_string(slot) + " has a step in flight (finish_batch first)");
  if (!sched_) {  // one device: the step runs now
    eval_batch(batch, n_seq, slot_logits_[k]);
    slot_in_flight_[k] = 1;
    return;
  }
  const auto [n_out, top] = check_batch(batch, n_seq);
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_kv = padded_kv(top, n_ctx_);
  std::unique_ptr<EvalGraph>& e = slot_graphs_[k];
  try {
    if (!e || !reuse_graphs_ || e->n != n || e->n_kv != n_kv || e->n_out != n_out || !sched_->holds(e->g)) {
      e.reset();  // its last step is finished: nothing reads it
      e = std::make_unique<EvalGraph>(*this, n, n_kv, LogitRows::all, n_out);
      pin_segments(*e);
      sched_->allocate(e->g, slot);  // the slot's own memory set
    }
    set_batch_inputs(e->in, batch, n_seq);
    // The last stage's part waits for finish_batch, so that the read of
    // this step's logits is queued on that device before the next slot's
    // work there (Scheduler::compute_head).
    sched_->compute_head(e->g);
    slot_in_flight_[k] = 1;
  } catch (...) {
    abandon_slots();
    throw;
  }
}

void LlamaModel::reserve_batch(int64_t n_tokens, int64_t n_out) {
  check_no_ring("reserve_batch");
  if (!sched_) return;
  check_idle();
  n_tokens = std::clamp<int64_t>(n_tokens, 1, n_ctx_);
  n_out = std::clamp<int64_t>(n_out, 1, n_tokens);
  EvalGraph largest(*this, n_tokens, padded_kv(n_ctx_, n_ctx_), LogitRows::all, n_out);
  pin_segments(largest);
  sched_->reserve(largest.g);
}

void LlamaModel::finish_batch(int slot, std::vector<float>& logits) {
  if (slot < 0 || slot >= static_cast<int>(slot_in_flight_.size()) || !slot_in_flight_[static_cast<size_t>(slot)])
    fail(ErrorKind::invalid_input, kWhere, "slot " + std::to_string(slot) + " has no step in flight");
  const size_t k = static_cast<size_t>(slot);
  if (!sched_) {
    logits.swap(slot_logits_[k]);
    slot_in_flight_[k] = 0;
    return;
  }
  EvalGraph& e = *slot_graphs_[k];
  try {
    logits.resize(static_cast<size_t>(e.logits->nelements()));
    sched_->read_output(e.g, *e.logits, logits.data(), e.logits->nbytes());  // submits the tail first
    sched_->wait(e.g);
    slot_in_flight_[k] = 0;
  } catch (...) {
    abandon_slots();
    throw;
  }
}

// After a failed step: nothing in flight may outlive its graph, and no slot
// keeps a graph whose memory state is unknown.
void LlamaModel::abandon_slots() {
  try {
    if (sched_) sched_->synchronize();
  } catch (const Error&) {  // the first error is the one thrown
  }
  for (size_t k = 0; k < slot_graphs_.size(); ++k) {
    slot_graphs_[k].reset();
    slot_in_flight_[k] = 0;
  }
}

// Micro-batches but the last evaluate into the KV cache only, each its own
// graph in the other memory set, submitted without a wait: allocate() waits
// only for the micro-batch two back (the last user of that set). The last
// one, with the logits asked for, is the usual eval, which waits for it;
// the earlier ones are done before their graphs go.
void LlamaModel::eval_pipelined(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                                LogitRows rows) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<std::unique_ptr<EvalGraph>> in_flight;
  auto drain = [&] {
    for (const auto& e : in_flight) sched_->wait(e->g);
    in_flight.clear();
  };
  // Every memory set sized once for the largest micro-batch: a buffer that
  // grew mid-prompt would be a call to a worker, which answers only after
  // the work queued before it, and the pipeline would drain at each one.
  const int64_t kv_max = padded_kv(n_past + n, n_ctx_);
  if (kv_max > pipeline_reserved_kv_) {
    EvalGraph largest(*this, micro_batch_, kv_max, LogitRows::none, 0);
    pin_segments(largest);
    sched_->reserve(largest.g);
    pipeline_reserved_kv_ = kv_max;
  }
  int64_t done = 0;
  try {
    for (; n - done > micro_batch_; done += micro_batch_) {
      const int64_t pos = n_past + done;
      // Kept from the start: a throw mid-submission must not free a graph a
      // backend may still read (the catch synchronizes first).
      EvalGraph& e = *in_flight.emplace_back(std::make_unique<EvalGraph>(
          *this, micro_batch_, padded_kv(pos + micro_batch_, n_ctx_), LogitRows::none, 0));
      pin_segments(e);
      sched_->allocate(e.g);  // waits for the micro-batch two back
      set_inputs(e.in, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(micro_batch_)), pos);
      sched_->compute_async(e.g);
    }
    EvalGraph& last = graph_for(n - done, padded_kv(n_past + n, n_ctx_), rows);
    set_inputs(last.in, tokens.subspan(static_cast<size_t>(done)), n_past + done);
    run_graph(last, logits);
    drain();
  } catch (...) {
    try {
      sched_->synchronize();  // nothing in flight may outlive its graph
    } catch (const Error&) {  // the first error is the one thrown
    }
    in_flight.clear();
    throw;
  }
}

void LlamaModel::run_graph(EvalGraph& e, std::vector<float>& logits) {
  if (!sched_) {
    backends_[0]->compute(e.g);
    backends_[0]->synchronize();
  } else {
    // Waits only for splits the host has not waited for already; compute()
    // would also send SYNCHRONIZE to every worker. A reused graph keeps the
    // scheduler's plan and memory from its first allocate.
    sched_->compute_async(e.g);
    if (e.rows != LogitRows::none) {
      // Read first: from a worker, the read is the wait (one round trip).
      logits.resize(static_cast<size_t>(e.logits->nelements()));
      sched_->read_output(e.g, *e.logits, logits.data(), e.logits->nbytes());
    }
    sched_->wait(e.g);
    if (e.rows == LogitRows::none) logits.clear();
    return;
  }
  if (e.rows == LogitRows::none) {
    logits.clear();
    return;
  }
  logits.resize(static_cast<size_t>(e.logits->nelements()));
  tensor_get(*e.logits, logits.data(), 0, e.logits->nbytes());
}

void fill_causal_mask(std::span<float> mask, int64_t n_kv, int64_t n, int64_t n_past, int64_t window) {
  if (n_kv < 0 || n < 0 || static_cast<uint64_t>(n_kv) * static_cast<uint64_t>(n) != mask.size())
    fail(ErrorKind::invalid_input, kWhere,
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
