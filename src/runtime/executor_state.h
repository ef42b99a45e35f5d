// The Executor's state and its work (weft/runtime/executor.h forwards to
// it; internal to src/runtime): one eval's graph, the kept graph, the
// slots, and what runs them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "weft/backend/alloc.h"
#include "weft/backend/sched.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/runtime/executor.h"

namespace weft::detail {

// The KV length a graph reads: n_kv rounded up to a multiple of 32 (at most
// n_ctx), masked beyond n_kv, so that consecutive tokens build graphs of the
// same shape and a worker's graph cache hits 31 times out of 32.
inline int64_t padded_kv(int64_t n_kv, int64_t n_ctx) {
  constexpr int64_t kPad = 32;
  return std::min(n_ctx, (n_kv + kPad - 1) / kPad * kPad);
}

// Its inputs and its logits, an output [n_vocab, n] (or [n_vocab, 1]; the
// hidden rows [n_embd, n] for LogitRows::hidden). It
// depends only on the token count, the (padded) KV length and the logit
// rows: positions, masks and token ids are inputs, so the graph serves
// every eval of that shape (ExecutorState::graph_for keeps the last).
struct EvalGraph {
  Context ctx;
  Graph g;
  int64_t n;
  int64_t n_kv;
  model::LogitRows rows;
  int64_t n_out;  // > 0: a batch's graph (out_rows)
  model::LlamaModel::Inputs in;
  model::LlamaModel::Forward forward;
  Tensor* logits;

  EvalGraph(const model::LlamaModel& m, int64_t n_tokens, int64_t kv, model::LogitRows logit_rows, int64_t n_out_rows)
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

// The executor's whole state. The public methods are Executor's (see
// there); one_device: a graph allocator and one backend, no Scheduler.
class ExecutorState {
 public:
  ExecutorState(const GgufFile& file, const Placement& placement, int64_t n_ctx, const model::LoadProgress& progress,
                const model::LoadOptions& options, bool one_device);
  ~ExecutorState();

  const model::LlamaModel& model() const { return *model_; }
  const model::LlamaParams& params() const { return model_->params(); }
  int64_t n_ctx() const { return model_->n_ctx(); }
  int64_t sliding_ring_rows() const { return model_->sliding_ring_rows(); }
  void eval(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits, model::LogitRows rows);
  void eval_batch(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                  model::LogitRows rows = model::LogitRows::all);
  int batch_slots() const;
  void submit_batch(int slot, std::span<const model::BatchToken> batch, int64_t n_seq);
  void finish_batch(int slot, std::vector<float>& logits);
  void reserve_batch(int64_t n_tokens, int64_t n_out);

  Placement placement_;
  std::unique_ptr<model::LlamaModel> model_;
  // Weights and KV cache memory, per part (none for an empty one).
  std::vector<std::unique_ptr<Buffer>> bufs_;
  size_t mapped_weight_bytes_ = 0;
  bool reuse_graphs_ = true;  // off only in white-box tests (ExecutorTestAccess)

 private:
  void load(const GgufFile& file, const model::LoadProgress& progress, bool map_weights);
  void check_tokens(std::span<const int32_t> tokens, int64_t n_past) const;
  void check_idle() const;  // no submit_batch step in flight
  // eval_batch's checks; returns the number of logit rows and the highest
  // cache row written, plus one.
  std::pair<int64_t, int64_t> check_batch(std::span<const model::BatchToken> batch, int64_t n_seq) const;
  std::unique_ptr<EvalGraph> new_graph(int64_t n, int64_t n_kv, model::LogitRows rows, int64_t n_out);
  EvalGraph& graph_for(int64_t n, int64_t n_kv, model::LogitRows rows, int64_t n_out = 0);
  // Pins each segment of a split graph to its part's backend.
  void pin_segments(EvalGraph& e);
  void run_graph(EvalGraph& e, std::vector<float>& logits);
  void abandon_slots();
  // eval() of a long prompt in micro-batches that flow through the devices
  // at once (LoadOptions::pipeline_micro_batch).
  void eval_pipelined(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                      model::LogitRows rows);
  // eval() in steps of at most ring_step_ tokens (a sliding-window ring).
  void eval_steps(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
                  model::LogitRows rows);
  // Refuses an eval from n_past that would read ring rows already
  // overwritten; records the positions it writes.
  void check_ring(int64_t n_past, int64_t n);
  // Refuses a batch over sequences while a ring is kept.
  void check_no_ring(const char* what) const;

  int64_t micro_batch_ = 0;           // > 0: prompts are pipelined (LoadOptions::pipeline_micro_batch)
  int64_t pipeline_reserved_kv_ = 0;  // the KV length the memory sets were last reserved for
  int64_t ring_step_ = 0;             // the most positions one eval writes with a ring
  int64_t ring_high_ = 0;             // one past the highest position written since an eval from 0
  int n_copies_ = 1;                  // the scheduler's memory sets
  // submit_batch's slots: each its graph (null until its first step), and
  // its step in flight (split), or its logits (one device).
  std::vector<std::unique_ptr<EvalGraph>> slot_graphs_;
  std::vector<char> slot_in_flight_;
  std::vector<std::vector<float>> slot_logits_;
  // What runs the graphs: one backend per part; on one device a graph
  // allocator for compute memory (reused across evals), on several the
  // Scheduler (declared after the backends it uses, so destroyed first).
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<GraphAllocator> galloc_;
  std::unique_ptr<Scheduler> sched_;
  // The last eval's graph (declared last: freed before what it is bound to).
  std::unique_ptr<EvalGraph> graph_;
};

}  // namespace weft::detail
