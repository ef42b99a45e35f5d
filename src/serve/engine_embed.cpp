// The serving engine's embeddings: queued with the completions, served
// between steps through BatchEngine::hidden_states (engine.h, EmbedJob).
#include <algorithm>

#include "serve/engine.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {
constexpr const char* kEngineEmbedWhere = "embeddings";
using Clock = std::chrono::steady_clock;
}  // namespace

std::optional<EmbedResult> EmbedRequest::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return result_.has_value(); })) return std::nullopt;
  return result_;
}

void EmbedRequest::set(EmbedResult r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (result_) return;  // once
    result_ = std::move(r);
  }
  cv_.notify_all();
}

std::shared_ptr<EmbedRequest> Engine::submit_embed(EmbedJob job) {
  if (job.inputs.empty()) fail(ErrorKind::invalid_input, kEngineEmbedWhere, "no inputs to embed");
  for (size_t i = 0; i < job.inputs.size(); ++i) {
    BatchJob probe;
    probe.prompt = job.inputs[i];
    try {
      batch_.check(probe);
    } catch (const Error& e) {
      fail(ErrorKind::invalid_input, kEngineEmbedWhere, "input " + std::to_string(i) + ": " + e.what());
    }
  }
  auto request = std::make_shared<EmbedRequest>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) fail(ErrorKind::disconnected, kEngineEmbedWhere, "the server is stopping");
    const size_t free_slots = static_cast<size_t>(metrics_.slots - metrics_.slots_busy);
    if (queue_.size() + embed_queue_.size() + 1 > options_.max_queue + free_slots) {
      ++metrics_.requests_rejected;
      return nullptr;
    }
    embed_queue_.emplace_back(std::move(job), request);
    metrics_.queue_length = queue_.size() + embed_queue_.size();
  }
  cv_.notify_all();
  return request;
}

void Engine::embed_queued() {
  for (;;) {
    std::pair<EmbedJob, std::shared_ptr<EmbedRequest>> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Clock::time_point now = Clock::now();
      while (!embed_queue_.empty() &&
             (embed_queue_.front().second->cancelled() || now >= embed_queue_.front().first.deadline)) {
        const bool cancelled = embed_queue_.front().second->cancelled();
        embed_queue_.front().second->set(EmbedResult{.error = cancelled ? "cancelled" : "timeout"});
        ++metrics_.requests_cancelled;
        embed_queue_.pop_front();
        metrics_.queue_length = queue_.size() + embed_queue_.size();
      }
      if (embed_queue_.empty()) return;
    }
    // hidden_states needs no step in flight: finish them (their tokens
    // sampled as usual); nothing new is launched until after the embedding.
    while (batch_.collect()) {
    }
    if (!batch_.has_free_slot()) return;  // every slot generates: after the next step that frees one
    {
      std::lock_guard<std::mutex> lock(mu_);
      next = std::move(embed_queue_.front());
      embed_queue_.pop_front();
      metrics_.queue_length = queue_.size() + embed_queue_.size();
    }
    EmbedResult result;
    try {
      result = embed(next.first, *next.second);
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++metrics_.requests_failed;
      }
      next.second->set(EmbedResult{.error = e.what()});
      throw;  // run() recovers the model or fails the running requests
    }
    {
      // Counted before the client hears: metrics() read after the answer
      // includes it.
      std::lock_guard<std::mutex> lock(mu_);
      ++(result.error.empty() ? metrics_.embeddings : metrics_.requests_cancelled);
      copy_counters();
    }
    next.second->set(std::move(result));
  }
}

EmbedResult Engine::embed(const EmbedJob& job, const EmbedRequest& request) {
  EmbedResult r;
  const size_t n_embd = static_cast<size_t>(session_.params().n_embd);
  // A request's inputs may take many steps: its deadline and its client
  // are looked at before each.
  bool timed_out = false;
  const std::optional<std::vector<std::vector<float>>> rows = batch_.hidden_states(job.inputs, [&] {
    timed_out = Clock::now() >= job.deadline;
    return timed_out || request.cancelled();
  });
  if (!rows) return EmbedResult{.error = timed_out ? "timeout" : "cancelled"};
  for (size_t i = 0; i < job.inputs.size(); ++i) {
    const size_t n = job.inputs[i].size();
    if ((*rows)[i].size() != n * n_embd)
      fail(ErrorKind::invalid_input, kEngineEmbedWhere,
           std::to_string((*rows)[i].size()) + " hidden values for " + std::to_string(n) + " tokens of width " +
               std::to_string(n_embd));
    r.vectors.push_back(pool_normalized((*rows)[i], n_embd, job.pooling));
    r.prompt_tokens += static_cast<int>(n);
  }
  return r;
}

}  // namespace weft::serve
