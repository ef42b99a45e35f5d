// Session: evaluation, generation, perplexity and stats (include/weft/runtime/session.h).
#include <algorithm>
#include <chrono>
#include <optional>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"
#include "weft/runtime/session.h"

namespace weft {

GenerationModel Session::generation_model() const {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "generation_model before load");
  const model::Tokenizer* tok = tokenizer_.get();
  return {.n_vocab = params_.n_vocab,
          .n_ctx = executor_->n_ctx(),
          .is_end_of_generation = [tok](int32_t t) { return tok->is_end_of_generation(t); },
          .encoder = params_.encoder};
}

BatchedEval Session::batched_eval() {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "batched_eval before load");
  // Through this Session, not its executor: a recovery replaces that.
  return {
      .slots = executor_->batch_slots(),
      .submit = [this](int slot, std::span<const model::BatchToken> batch,
                       int64_t n_seq) { submit_batch(slot, batch, n_seq); },
      .finish = [this](int slot, std::vector<float>& logits) { finish_batch(slot, logits); },
      .reserve = [this](int64_t n_tokens, int64_t n_out) { reserve_batch(n_tokens, n_out); },
      .recover = [this](const std::exception& cause) { return recover_batched(cause); },
      .rejoin = [this](const RejoinEstimate* running) { return rejoin_batched(running); },
      .rejoin_ready = [this] { return every_lost_worker_answers(); },
      .hidden = [this](std::span<const model::BatchToken> batch, int64_t n_seq,
                       std::vector<float>& rows) { eval_batch(batch, n_seq, rows, model::LogitRows::hidden); },
  };
}

void Session::note_history(std::span<const int32_t> tokens, int64_t n_past) {
  if (!options_.recover) return;  // kept for a recovery only
  if (!history_known_ || n_past > static_cast<int64_t>(history_.size())) {
    history_known_ = n_past == 0;  // a gap: what the cache holds before n_past is not known
    history_.clear();
    if (!history_known_) return;
  }
  history_.resize(static_cast<size_t>(n_past));
  history_.insert(history_.end(), tokens.begin(), tokens.end());
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, int64_t n_past, model::LogitRows rows) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "eval before load");
  note_history(tokens, n_past);
  return executor_->eval(tokens, n_past, rows);
}

void Session::eval_batch(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                         model::LogitRows rows) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "eval_batch before load");
  forget_history();
  executor_->eval_batch(batch, n_seq, logits, rows);
}

int Session::batch_slots() const {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "batch_slots before load");
  return executor_->batch_slots();
}

void Session::submit_batch(int slot, std::span<const model::BatchToken> batch, int64_t n_seq) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "submit_batch before load");
  forget_history();
  executor_->submit_batch(slot, batch, n_seq);
}

void Session::finish_batch(int slot, std::vector<float>& logits) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "finish_batch before load");
  executor_->finish_batch(slot, logits);
}

void Session::reserve_batch(int64_t n_tokens, int64_t n_out) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "reserve_batch before load");
  executor_->reserve_batch(n_tokens, n_out);
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "generate before load");
  const GenerationModel m = generation_model();
  // Every token in the cache from position 0 (history_, kept by every
  // single-sequence eval): what a recovery re-evaluates. A generation that
  // continues a cache whose start is not known cannot recover.
  // With recover, each decoded token's eval is timed (the rejoin rule's
  // time per token), and before it a worker that answers again may be
  // taken back (try_rejoin), which evaluates the history and this token.
  rejoin_noted_ = false;  // a return declined before is reported again in this generation
  int64_t sampled = -1;   // tokens sampled before this eval (-1 before the prompt's)
  auto eval_last = [&](std::span<const int32_t> t, int64_t n_past, std::vector<float>& logits) {
    note_history(t, n_past);
    ++sampled;
    try {
      const int64_t remaining = std::min<int64_t>(options.max_tokens - sampled, executor_->n_ctx() - n_past - 1);
      if (options_.recover && sampled > 0 && try_rejoin(remaining, logits)) return;
      const auto t0 = std::chrono::steady_clock::now();
      executor_->eval(t, n_past, logits, model::LogitRows::last);
      if (options_.recover && sampled > 0 && t.size() == 1)
        note_decode_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } catch (const Error& e) {
      if (!options_.recover || !history_known_ || e.kind() != ErrorKind::disconnected ||
          !recover(e, history_, logits))
        throw;
    }
  };
  return run_generation(eval_last, m, prompt, options, on_token);
}

std::vector<GenerateResult> Session::generate_parallel(std::span<const std::vector<int32_t>> prompts,
                                                       const GenerateOptions& options,
                                                       const SequenceTokenCallback& on_token) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "generate_parallel before load");
  return run_parallel_generation(batched_eval(), generation_model(), prompts, options, on_token);
}

model::PerplexityScore Session::perplexity(
    std::span<const int32_t> tokens, int64_t n_chunks,
    const std::function<void(int64_t, const model::PerplexityScore&)>& on_chunk) {
  if (!executor_) fail(ErrorKind::invalid_input, options_.name, "perplexity before load");
  forget_history();  // its chunks overwrite the cache
  const model::Tokenizer& tok = *tokenizer_;
  return model::chunked_perplexity(
      tokens, executor_->n_ctx(), n_chunks, tok.add_bos() ? tok.bos() : -1, params_.n_vocab,
      [this](std::span<const int32_t> chunk) { return executor_->eval(chunk, 0); }, on_chunk);
}

size_t Session::mapped_weight_bytes() const { return executor_ ? executor_->mapped_weight_bytes() : 0; }

std::vector<DeviceStats> Session::stats() const {
  std::vector<DeviceStats> out;
  for (const DeviceSpec& spec : specs_) {
    DeviceStats s{.label = spec.label(), .remote = spec.kind == DeviceSpecKind::rpc};
    if (s.remote) s.rpc = rpc_stats(spec.endpoint);
    out.push_back(s);
  }
  return out;
}

std::vector<DeviceCompute> Session::compute_stats() const {
  std::vector<DeviceCompute> out;
  for (const DeviceSpec& spec : specs_) {
    DeviceCompute c;
    if (spec.kind == DeviceSpecKind::rpc) {
      if (const std::optional<WorkerCompute> w = rpc_compute_stats(spec.endpoint, static_cast<uint32_t>(spec.index)))
        c = {w->seconds, w->graphs};
    } else if (spec.kind == DeviceSpecKind::cpu) {
      const CpuComputeStats s = cpu_compute_stats();
      c = {s.seconds, s.graphs};
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace weft
