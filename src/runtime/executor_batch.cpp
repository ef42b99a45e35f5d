// Executor: steps over several sequences (eval_batch), their slots in
// flight across the stages (submit_batch / finish_batch), and prompts cut
// into micro-batches that flow through the stages at once.
#include <algorithm>
#include <string>

#include "runtime/executor_state.h"
#include "weft/core/error.h"
#include "weft/runtime/executor.h"

namespace weft::detail {
namespace {

constexpr const char* kExecutorBatchWhere = "model";

using model::BatchToken;
using model::LogitRows;

}  // namespace

std::pair<int64_t, int64_t> ExecutorState::check_batch(std::span<const BatchToken> batch, int64_t n_seq) const {
  check_no_ring("a batch");
  const int64_t n_ctx = model_->n_ctx();
  if (batch.empty()) fail(ErrorKind::invalid_input, kExecutorBatchWhere, "eval_batch needs at least one token");
  if (n_seq <= 0 || n_seq > n_ctx || n_ctx % n_seq != 0)
    fail(ErrorKind::invalid_input, kExecutorBatchWhere,
         std::to_string(n_seq) + " sequences do not divide the context of " + std::to_string(n_ctx));
  const int64_t seq_ctx = n_ctx / n_seq;
  int64_t n_out = 0, top = 0;
  for (const BatchToken& b : batch) {
    if (b.seq < 0 || b.seq >= n_seq || b.pos < 0 || b.pos >= seq_ctx)
      fail(ErrorKind::invalid_input, kExecutorBatchWhere,
           "token at position " + std::to_string(b.pos) + " of sequence " + std::to_string(b.seq) + " is outside " +
               std::to_string(n_seq) + " sequences of " + std::to_string(seq_ctx) + " positions");
    if (b.token < 0 || b.token >= params().n_vocab)
      fail(ErrorKind::invalid_input, kExecutorBatchWhere,
           "token id " + std::to_string(b.token) + " is outside the vocabulary of " + std::to_string(params().n_vocab));
    n_out += b.logits ? 1 : 0;
    top = std::max(top, b.seq * seq_ctx + b.pos + 1);
  }
  if (n_out == 0) fail(ErrorKind::invalid_input, kExecutorBatchWhere, "no token of the batch asks for logits");
  return {n_out, top};
}

void ExecutorState::eval_batch(std::span<const BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                               LogitRows rows) {
  check_idle();
  const auto [n_out, top] = check_batch(batch, n_seq);
  const int64_t n = static_cast<int64_t>(batch.size());
  rows = rows == LogitRows::hidden ? LogitRows::hidden : LogitRows::all;
  EvalGraph& e = graph_for(n, padded_kv(top, n_ctx()), rows, n_out);
  model_->set_batch_inputs(e.in, batch, n_seq);
  run_graph(e, logits);
}

int ExecutorState::batch_slots() const { return sched_ ? n_copies_ : 1; }

void ExecutorState::submit_batch(int slot, std::span<const BatchToken> batch, int64_t n_seq) {
  if (slot < 0 || slot >= batch_slots())
    fail(ErrorKind::invalid_input, kExecutorBatchWhere,
         "slot " + std::to_string(slot) + " is outside [0, " + std::to_string(batch_slots()) + ")");
  const size_t k = static_cast<size_t>(slot);
  slot_graphs_.resize(static_cast<size_t>(batch_slots()));
  slot_in_flight_.resize(slot_graphs_.size());
  slot_logits_.resize(slot_graphs_.size());
  if (slot_in_flight_[k])
    fail(ErrorKind::invalid_input, kExecutorBatchWhere,
         "slot " + std::to_string(slot) + " has a step in flight (finish_batch first)");
  if (!sched_) {  // one device: the step runs now
    eval_batch(batch, n_seq, slot_logits_[k]);
    slot_in_flight_[k] = 1;
    return;
  }
  const auto [n_out, top] = check_batch(batch, n_seq);
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t n_kv = padded_kv(top, n_ctx());
  std::unique_ptr<EvalGraph>& e = slot_graphs_[k];
  try {
    if (!e || !reuse_graphs_ || e->n != n || e->n_kv != n_kv || e->n_out != n_out || !sched_->holds(e->g)) {
      e.reset();  // its last step is finished: nothing reads it
      e = new_graph(n, n_kv, LogitRows::all, n_out);
      pin_segments(*e);
      sched_->allocate(e->g, slot);  // the slot's own memory set
    }
    model_->set_batch_inputs(e->in, batch, n_seq);
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

void ExecutorState::reserve_batch(int64_t n_tokens, int64_t n_out) {
  check_no_ring("reserve_batch");
  if (!sched_) return;
  check_idle();
  n_tokens = std::clamp<int64_t>(n_tokens, 1, n_ctx());
  n_out = std::clamp<int64_t>(n_out, 1, n_tokens);
  EvalGraph largest(*model_, n_tokens, padded_kv(n_ctx(), n_ctx()), LogitRows::all, n_out);
  pin_segments(largest);
  sched_->reserve(largest.g);
}

void ExecutorState::finish_batch(int slot, std::vector<float>& logits) {
  if (slot < 0 || slot >= static_cast<int>(slot_in_flight_.size()) || !slot_in_flight_[static_cast<size_t>(slot)])
    fail(ErrorKind::invalid_input, kExecutorBatchWhere, "slot " + std::to_string(slot) + " has no step in flight");
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
void ExecutorState::abandon_slots() {
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
void ExecutorState::eval_pipelined(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits,
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
  const int64_t kv_max = padded_kv(n_past + n, n_ctx());
  if (kv_max > pipeline_reserved_kv_) {
    EvalGraph largest(*model_, micro_batch_, kv_max, LogitRows::none, 0);
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
      EvalGraph& e = *in_flight.emplace_back(
          new_graph(micro_batch_, padded_kv(pos + micro_batch_, n_ctx()), LogitRows::none, 0));
      pin_segments(e);
      sched_->allocate(e.g);  // waits for the micro-batch two back
      model_->set_inputs(e.in, tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(micro_batch_)), pos);
      sched_->compute_async(e.g);
    }
    EvalGraph& last = graph_for(n - done, padded_kv(n_past + n, n_ctx()), rows);
    model_->set_inputs(last.in, tokens.subspan(static_cast<size_t>(done)), n_past + done);
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

}  // namespace weft::detail
