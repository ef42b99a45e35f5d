// Executor: a model's memory on its devices, its backends and scheduler,
// and one eval: the graph kept for reuse, the sliding-window ring's steps.
#include "weft/runtime/executor.h"

#include <algorithm>
#include <string>

#include "runtime/executor_state.h"
#include "weft/core/error.h"

namespace weft::detail {
namespace {

constexpr const char* kExecutorWhere = "model";

using model::LogitRows;

// Where the model's graph is cut and what the parts' devices run.
model::ModelLayout layout_for(const GgufFile& file, const Placement& placement, const model::LoadOptions& options) {
  const model::LlamaParams p = model::LlamaParams::from_gguf(file);
  placement.check(p.n_layer, p.n_head, p.n_head_kv);
  model::check_cache_type(p, options.cache_type);
  model::ModelLayout layout;
  // A run cut by heads: its first part holds the layers, the others none
  // of their own (their shares are tensor_shares).
  layout.layer_bounds = placement.layer_bounds();
  if (placement.splits_heads()) {
    if (!options.expert_split.empty())
      fail(ErrorKind::unsupported, kExecutorWhere,
           "an expert split with a placement cut by heads (split one or the other)");
    layout.tensor_shares = tensor_shares(file, placement);
  }
  layout.expert_split = options.expert_split;
  layout.experts_overlap = options.experts_overlap;
  layout.cache_type = options.cache_type;
  const bool partials_fit = options.tensor_partials == DType::f32 ||
                            (options.tensor_partials == DType::q8_0 &&
                             (!placement.splits_heads() || p.n_embd % static_cast<int64_t>(kQuantBlock) == 0));
  if (!partials_fit)
    fail(ErrorKind::unsupported, kExecutorWhere,
         "tensor-parallel partials as " + std::string(dtype_name(options.tensor_partials)) +
             " (f32, or q8_0 for a width that is a multiple of 32; this model's is " + std::to_string(p.n_embd) + ")");
  layout.partials_type = options.tensor_partials;
  layout.sliding_ring_step = options.sliding_ring_step;
  layout.fused_attention = options.fused_attention;
  for (const PlacementPart& part : placement.parts) {
    if (layout.fused_attention && part.first_layer < part.last_layer) {
      Context ctx;
      layout.fused_attention = part.device->supports_op(*model::flash_attn_probe(ctx, p, options.cache_type));
    }
  }
  // The unfused products read the values transposed, which a block type
  // cannot be: a quantized cache is attended to by flash_attn only.
  if (options.cache_type != DType::f16 && !layout.fused_attention)
    fail(ErrorKind::unsupported, kExecutorWhere,
         "a " + std::string(dtype_name(options.cache_type)) + " KV cache needs fused attention, which " +
             (options.fused_attention ? "a device of the placement does not run (an older worker?)"
                                      : std::string("LoadOptions::fused_attention turns off")));
  if (!options.expert_split.empty() && p.n_expert > 0) {
    for (const PlacementPart& part : placement.parts) {
      Context ctx;
      layout.routes_rows.push_back(
          options.experts_routed_rows && part.device->supports_op(*model::routed_rows_probe(ctx, p)) ? 1 : 0);
    }
  }
  return layout;
}

// Where the partial sums of each run cut by heads meet
// (ModelLayout::partials_meet): on the first of the run's other parts when
// the home cannot take their results in stream order (this host reading
// workers: a read each) and that part can from each of the others (peer
// links): the home then reads one sum per layer's sum, not one per worker,
// and its link carries one partial back instead of one per worker.
std::vector<char> partials_meet(const std::vector<model::TensorShare>& shares,
                                const std::vector<std::unique_ptr<Backend>>& backends) {
  std::vector<char> meet(shares.size(), 0);
  for (size_t home = 0; home < shares.size(); ++home) {
    std::vector<size_t> others;
    for (size_t q = 0; q < shares.size(); ++q)
      if (q != home && shares[q].home == static_cast<int>(home)) others.push_back(q);
    if (others.size() < 2) continue;
    const Backend& first = *backends[others.front()];
    bool meets = !backends[home]->copies_ordered_from(first);
    for (size_t i = 1; i < others.size(); ++i) meets = meets && first.copies_ordered_from(*backends[others[i]]);
    meet[home] = meets ? 1 : 0;
  }
  return meet;
}

}  // namespace

ExecutorState::ExecutorState(const GgufFile& file, const Placement& placement, int64_t n_ctx,
                             const model::LoadProgress& progress, const model::LoadOptions& options, bool one_device)
    : placement_(placement) {
  model::ModelLayout layout = layout_for(file, placement_, options);
  std::vector<Backend*> list;
  if (!one_device) {
    for (const PlacementPart& part : placement_.parts)
      list.push_back(backends_.emplace_back(part.device->create_backend()).get());
    layout.partials_meet = partials_meet(layout.tensor_shares, backends_);
  }
  model_ = std::make_unique<model::LlamaModel>(file, n_ctx, layout);
  load(file, progress, options.map_weights);
  ring_step_ = options.sliding_ring_step;
  if (one_device) {
    Device& device = *placement_.parts.front().device;
    backends_.push_back(device.create_backend());
    galloc_ = std::make_unique<GraphAllocator>(std::vector<BufferType*>{&device.default_buffer_type()});
    return;
  }
  // A stage: a run of layers (the parts cutting it by heads work on it at once).
  int stages = 0;
  const std::vector<int64_t>& bounds = model_->layout().layer_bounds;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) stages += bounds[i] < bounds[i + 1] ? 1 : 0;
  SchedulerOptions so;
  if (stages >= 2) {
    // One memory set per stage (at most 4): micro-batch i + 1 of a prompt,
    // or another slot's step, is placed while i is in flight.
    so.n_copies = std::min(stages, 4);
    if (options.pipeline_micro_batch > 0) micro_batch_ = options.pipeline_micro_batch;
    if (sliding_ring_rows() > 0) micro_batch_ = std::min(micro_batch_, ring_step_);  // a micro-batch is one ring step
  }
  n_copies_ = so.n_copies;
  sched_ = std::make_unique<Scheduler>(list, so);
}

// One weights buffer per part (the file's mapped bytes in place, or filled
// from the file) and one zeroed KV cache buffer.
void ExecutorState::load(const GgufFile& file, const model::LoadProgress& progress, bool map_weights) {
  const model::LlamaModel& m = *model_;
  size_t total = 0, done = 0;
  for (int i = 0; i < m.n_parts(); ++i)
    for (const Tensor* t : m.part_weights(i)) total += t->nbytes();
  for (int i = 0; i < m.n_parts(); ++i) {
    Device& device = *placement_.parts[static_cast<size_t>(i)].device;
    for (auto& b : m.load_part_weights(file, i, device, map_weights, progress, done, total, mapped_weight_bytes_))
      bufs_.push_back(std::move(b));
  }
  for (int i = 0; i < m.n_parts(); ++i) {
    auto buf = allocate_tensors(placement_.parts[static_cast<size_t>(i)].device->default_buffer_type(),
                                m.part_caches(i));
    if (!buf) continue;
    buf->clear(0);
    bufs_.push_back(std::move(buf));
  }
}

ExecutorState::~ExecutorState() {
  // Work an eval left in flight (it threw after submitting) must finish
  // before the compute and weight buffers it uses are freed.
  for (const auto& b : backends_) {
    try {
      b->synchronize();
    } catch (const Error&) {  // its error was reported, or the peer is gone
    }
  }
}

void ExecutorState::check_idle() const {
  for (char busy : slot_in_flight_)
    if (busy)
      fail(ErrorKind::invalid_input, kExecutorWhere,
           "an eval while a submit_batch step is in flight (finish_batch first)");
}

void ExecutorState::check_tokens(std::span<const int32_t> tokens, int64_t n_past) const {
  check_idle();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_ctx = model_->n_ctx();
  if (n == 0) fail(ErrorKind::invalid_input, kExecutorWhere, "eval needs at least one token");
  if (n_past < 0 || n_past > n_ctx || n > n_ctx - n_past)
    fail(ErrorKind::invalid_input, kExecutorWhere,
         std::to_string(n) + " tokens after " + std::to_string(n_past) + " do not fit the context of " +
             std::to_string(n_ctx));
  for (int32_t t : tokens)
    if (t < 0 || t >= params().n_vocab)
      fail(ErrorKind::invalid_input, kExecutorWhere,
           "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(params().n_vocab));
}

std::unique_ptr<EvalGraph> ExecutorState::new_graph(int64_t n, int64_t n_kv, LogitRows rows, int64_t n_out) {
  return std::make_unique<EvalGraph>(*model_, n, n_kv, rows, n_out);
}

// The graph for n tokens reading n_kv cache rows: the last one when its
// shape matches (and reuse is on), else a new one, allocated (and, split,
// pinned segment by segment to its parts' backends).
EvalGraph& ExecutorState::graph_for(int64_t n, int64_t n_kv, LogitRows rows, int64_t n_out) {
  if (rows == LogitRows::last && n == 1) rows = LogitRows::all;  // the same graph
  if (n_out > 0 && rows != LogitRows::hidden) rows = LogitRows::all;  // out_rows decides
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
  auto fresh = new_graph(n, n_kv, rows, n_out);
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

void ExecutorState::pin_segments(EvalGraph& e) {
  const std::vector<size_t>& begin = e.forward.segment_begin;  // n_layer + 2
  auto& tensors = e.ctx.tensors();
  for (size_t s = 0; s < begin.size(); ++s) {
    const size_t end = s + 1 < begin.size() ? begin[s + 1] : e.ctx.size();
    const int part = s == 0                  ? 0
                     : s + 1 == begin.size() ? model_->output_part()
                                             : model_->layer_part(static_cast<int64_t>(s) - 1);
    for (size_t i = begin[s]; i < end; ++i) {
      Tensor& t = tensors[i];
      if (t.op == Op::none || !e.g.contains(&t)) continue;
      // A tied output product (and the soft-cap after it) runs where the
      // embedding is, rather than copying the embedding to the last device.
      if (model_->output_tied() && !model_->output_split() && i >= e.forward.output_index) continue;
      sched_->set_backend(t, *backends_[static_cast<size_t>(part)]);
    }
  }
  // Cut by heads, the shards of other parts come first in the graph and
  // would take the inputs (read by every layer) to their device, where the
  // home part's nodes would have to read them back, a round trip each: the
  // inputs stay with the first part (which holds the embedding), and the
  // other parts are sent them.
  if (placement_.splits_heads()) {
    const model::LlamaModel::Inputs& in = e.in;
    for (Tensor* t : {in.tokens, in.positions, in.kv_rows, in.mask, in.mask_swa, in.kv_rows_swa, in.rope_factors,
                      in.out_rows})
      if (t != nullptr) sched_->set_backend(*t, *backends_.front());
  }
  // An expert slice or a shard runs where its weights are, not on its
  // layer's device.
  for (const model::LlamaModel::NodeRange& r : e.forward.part_nodes)
    for (size_t i = r.begin; i < r.end; ++i)
      if (tensors[i].op != Op::none && e.g.contains(&tensors[i]))
        sched_->set_backend(tensors[i], *backends_[static_cast<size_t>(r.part)]);
}

void ExecutorState::eval(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits, LogitRows rows) {
  check_tokens(tokens, n_past);
  const int64_t n = static_cast<int64_t>(tokens.size());
  check_ring(n_past, n);
  // Every token's rows (logits or hidden) come from one graph; only the
  // last token's (or none) may be pipelined in micro-batches.
  const bool every_row = rows == LogitRows::all || rows == LogitRows::hidden;
  if (sched_ && micro_batch_ > 0 && n > micro_batch_ && !every_row) {
    eval_pipelined(tokens, n_past, logits, rows);
    return;
  }
  if (sliding_ring_rows() > 0 && n > ring_step_) {
    eval_steps(tokens, n_past, logits, rows);
    return;
  }
  EvalGraph& e = graph_for(n, padded_kv(n_past + n, n_ctx()), rows);
  model_->set_inputs(e.in, tokens, n_past);
  run_graph(e, logits);
}

// A ring (see LoadOptions::sliding_ring_step) holds the window before the
// next position written as long as every eval writes at most ring_step_
// positions after the last: row p mod R then still holds p for each p of a
// query's window. Going back to n_past > 0 (a reused prefix) needs the
// window before it, positions [n_past - n_swa + 1, n_past), none of them
// overwritten since: each p there with p + R beyond the highest position
// written is intact. Going back to 0 needs nothing.
void ExecutorState::check_ring(int64_t n_past, int64_t n) {
  const int64_t ring_rows = sliding_ring_rows();
  if (ring_rows == 0) return;
  if (n_past == 0) ring_high_ = 0;
  const int64_t oldest = std::max<int64_t>(0, n_past - params().n_swa + 1);
  if (n_past < ring_high_ && oldest + ring_rows < ring_high_)
    fail(ErrorKind::invalid_input, kExecutorWhere,
         "an eval from position " + std::to_string(n_past) + " after positions up to " +
             std::to_string(ring_high_ - 1) + " were written: the sliding-window ring of " + std::to_string(ring_rows) +
             " rows no longer holds positions from " + std::to_string(oldest) +
             " (evaluate from 0, or load with LoadOptions::sliding_ring_step = 0)");
  ring_high_ = std::max(ring_high_, n_past + n);
}

void ExecutorState::check_no_ring(const char* what) const {
  if (sliding_ring_rows() > 0)
    fail(ErrorKind::invalid_input, kExecutorWhere,
         std::string(what) + " over sequences needs full KV caches, and this model keeps a sliding-window ring of " +
             std::to_string(sliding_ring_rows()) + " rows (load with LoadOptions::sliding_ring_step = 0)");
}

void ExecutorState::eval_steps(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                          LogitRows rows) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> part;
  logits.clear();
  for (int64_t done = 0; done < n; done += ring_step_) {
    const int64_t m = std::min(ring_step_, n - done);
    const bool last = done + m == n;
    const bool every_row = rows == LogitRows::all || rows == LogitRows::hidden;
    const LogitRows step_rows = every_row || last ? rows : LogitRows::none;
    EvalGraph& e = graph_for(m, padded_kv(n_past + done + m, n_ctx()), step_rows);
    model_->set_inputs(e.in, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)), n_past + done);
    run_graph(e, part);
    if (every_row)
      logits.insert(logits.end(), part.begin(), part.end());
    else if (last)
      logits.swap(part);
  }
}

void ExecutorState::run_graph(EvalGraph& e, std::vector<float>& logits) {
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

}  // namespace weft::detail
