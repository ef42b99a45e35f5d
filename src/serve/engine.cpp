// The serving engine's thread: admission, batched steps, sampling and the
// text each request receives (engine.h).
#include "serve/engine.h"

#include <algorithm>
#include <cmath>

#include "serve/text_stream.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {

constexpr const char* kWhere = "serve";

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// log-softmax of row at the chosen token, and the k most likely tokens.
void logprobs_of(std::span<const float> row, int32_t chosen, int k, TokenLogprob& out_chosen,
                 std::vector<TokenLogprob>& out_top) {
  float max = -INFINITY;
  for (float v : row) max = std::max(max, v);
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  const double log_z = max + std::log(sum);
  out_chosen = {chosen, static_cast<float>(row[static_cast<size_t>(chosen)] - log_z)};
  out_top.clear();
  if (k <= 0) return;
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t kk = std::min(static_cast<size_t>(k), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(), [&](int32_t a, int32_t b) {
    return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] || (row[static_cast<size_t>(a)] ==
                                                                               row[static_cast<size_t>(b)] && a < b);
  });
  for (size_t i = 0; i < kk; ++i)
    out_top.push_back({ids[i], static_cast<float>(row[static_cast<size_t>(ids[i])] - log_z)});
}

}  // namespace

std::optional<Event> Request::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return std::nullopt;
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  if (e.finished) done_ = true;
  return e;
}

void Request::push(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

// A sequence of the batch: its part of the KV cache and, while busy, the
// request it serves. Engine thread only.
struct Engine::Slot {
  int index = 0;
  std::vector<int32_t> cached;  // tokens whose keys and values are in this slot's rows, in order
  std::shared_ptr<Request> request;  // null: free
  Job job;
  size_t fed = 0;     // prompt tokens in the cache
  int32_t next = -1;  // the sampled token to feed at the next step
  int generated = 0;
  int cached_prefix = 0;
  std::unique_ptr<model::Sampler> sampler;
  TextStream text;
  Event out;  // tokens (and logprobs) not yet handed over with text
  Clock::time_point admitted, first_token;
  bool stepping = false;  // its tokens are in a step in flight
  bool busy() const { return request != nullptr; }
  bool prefilled() const { return fed == job.prompt.size(); }
};

Engine::Engine(Session& session, EngineOptions options) : session_(session), options_(options) {
  if (!session_.loaded()) fail(ErrorKind::invalid_input, kWhere, "the engine needs a loaded session");
  const int64_t n_ctx = session_.n_ctx();
  if (options_.slots < 1 || n_ctx % options_.slots != 0)
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(options_.slots) + " slots do not divide the context of " + std::to_string(n_ctx));
  if (options_.batch_tokens < 1) fail(ErrorKind::invalid_input, kWhere, "batch_tokens must be at least 1");
  slot_ctx_ = n_ctx / options_.slots;
  for (int i = 0; i < options_.slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->index = i;
  }
  n_groups_ = options_.pipelined ? std::max(1, std::min(session_.batch_slots(), options_.slots)) : 1;
  groups_.resize(static_cast<size_t>(n_groups_));
  // Every memory set sized once for the largest step: a buffer that grew
  // while steps are in flight would be a call to a worker, which answers
  // only after the work queued before it (the pipeline would drain).
  if (n_groups_ > 1) session_.reserve_batch(options_.batch_tokens + options_.slots, options_.slots + 1);
  metrics_.slots = options_.slots;
  metrics_.groups = n_groups_;
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& s : slots_)
    if (s->busy()) finish(*s, "cancelled");
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : queue_) {
    Event e;
    e.finished = true;
    e.finish_reason = "cancelled";
    p.request->push(std::move(e));
  }
  queue_.clear();
  metrics_.queue_length = 0;
}

std::shared_ptr<Request> Engine::submit(Job job) {
  const int64_t vocab = session_.params().n_vocab;
  if (job.prompt.empty()) fail(ErrorKind::invalid_input, kWhere, "the prompt is empty");
  if (static_cast<int64_t>(job.prompt.size()) > slot_ctx_)
    fail(ErrorKind::invalid_input, kWhere,
         "the prompt's " + std::to_string(job.prompt.size()) + " tokens do not fit a slot's context of " +
             std::to_string(slot_ctx_));
  for (int32_t t : job.prompt)
    if (t < 0 || t >= vocab)
      fail(ErrorKind::invalid_input, kWhere,
           "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab));
  if (job.max_tokens < 0) fail(ErrorKind::invalid_input, kWhere, "max_tokens must not be negative");
  model::Sampler check(job.sampler);  // throws naming an impossible option
  auto request = std::make_shared<Request>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) fail(ErrorKind::disconnected, kWhere, "the server is stopping");
    // Free slots take requests at once; beyond them max_queue may wait.
    const size_t free_slots = static_cast<size_t>(metrics_.slots - metrics_.slots_busy);
    if (queue_.size() >= options_.max_queue + free_slots) {
      ++metrics_.requests_rejected;
      return nullptr;
    }
    queue_.push_back({std::move(job), request});
    metrics_.queue_length = queue_.size();
  }
  cv_.notify_all();
  return request;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void Engine::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool any_busy = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || any_busy || !in_flight_.empty(); });
      if (stop_) break;
    }
    // A step that throws (a worker died; an allocation failed) ends the
    // busy requests, not the process. Whatever is still in flight is
    // finished first (the model may have abandoned it already, when the
    // error was its own), and the cache's state is unknown: no slot's tokens
    // are reused.
    try {
      advance();
    } catch (const std::exception& e) {
      drain();
      for (auto& s : slots_) {
        s->stepping = false;
        s->cached.clear();
        if (s->busy()) finish(*s, "error", e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.last_error = e.what();
    }
  }
  drain();
}

void Engine::drain() {
  while (!in_flight_.empty()) {
    const int k = in_flight_.front();
    in_flight_.pop_front();
    end_step(groups_[static_cast<size_t>(k)]);
    try {
      session_.finish_batch(k, logits_);
    } catch (const std::exception&) {  // the model abandoned the rest: nothing is in flight
      while (!in_flight_.empty()) {
        end_step(groups_[static_cast<size_t>(in_flight_.front())]);
        in_flight_.pop_front();
      }
    }
  }
}

void Engine::end_step(Group& g) {
  g.in_flight = false;
  for (Slot* s : g.members) s->stepping = false;
}

void Engine::submit_step(int group) {
  Group& g = groups_[static_cast<size_t>(group)];
  session_.submit_batch(group, g.batch, static_cast<int64_t>(slots_.size()));  // throws to run()
  g.in_flight = true;
  for (Slot* s : g.members) s->stepping = true;
  in_flight_.push_back(group);
}

void Engine::advance() {
  const Clock::time_point t0 = Clock::now();
  bool worked = false;
  uint64_t prompt_tokens = 0, sampled = 0, steps = 0;
  if (!in_flight_.empty()) {
    const int k = in_flight_.front();
    Group& g = groups_[static_cast<size_t>(k)];
    in_flight_.pop_front();
    end_step(g);
    session_.finish_batch(k, logits_);  // throws to run()
    const size_t vocab = static_cast<size_t>(session_.params().n_vocab);
    for (size_t r = 0; r < g.rows.size(); ++r) {
      if (!g.rows[r]) continue;
      emit_token(*g.rows[r], std::span<const float>(&logits_[r * vocab], vocab));
      ++sampled;
    }
    prompt_tokens += g.prompt_tokens;
    ++steps;
    worked = true;
  }
  admit();
  const bool prompts = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy() && !s->prefilled(); });
  if (n_groups_ > 1 && prompts) {
    for (int k = 0; k < n_groups_; ++k) {
      if (groups_[static_cast<size_t>(k)].in_flight || !build(k, false)) continue;
      submit_step(k);
      worked = true;
    }
  } else if (in_flight_.empty() && build(0, true)) {  // one step of every slot, once the others are done
    submit_step(0);
    worked = true;
  }
  if (!worked) return;
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.steps += steps;
  metrics_.busy_seconds += seconds_between(t0, Clock::now());
  metrics_.prompt_tokens += prompt_tokens;
  metrics_.generated_tokens += sampled;
}

void Engine::admit() {
  const Clock::time_point now = Clock::now();
  for (auto& s : slots_)  // the client went away, or the deadline passed (between its group's steps)
    if (s->busy() && idle(*s) && (s->request->cancelled() || now >= s->job.deadline))
      finish(*s, s->request->cancelled() ? "cancelled" : "timeout");
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!it->request->cancelled() && now < it->job.deadline) {
      ++it;
      continue;
    }
    Event e;
    e.finished = true;
    e.finish_reason = it->request->cancelled() ? "cancelled" : "timeout";
    e.prompt_tokens = static_cast<int>(it->job.prompt.size());
    it->request->push(std::move(e));
    ++metrics_.requests_cancelled;
    it = queue_.erase(it);
  }
  metrics_.queue_length = queue_.size();
  while (!queue_.empty()) {
    // The free slot sharing the longest prefix with the prompt; among
    // equals the one with the fewest cached tokens to lose, then the lowest
    // (its rows are read by fewer masks).
    Slot* best = nullptr;
    size_t best_common = 0;
    for (auto& s : slots_) {
      if (s->busy() || !idle(*s)) continue;
      const size_t common = common_prefix(s->cached, queue_.front().job.prompt);
      if (!best || common > best_common || (common == best_common && s->cached.size() < best->cached.size()))
        best = s.get(), best_common = common;
    }
    if (!best) break;
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    Slot& s = *best;
    s.job = std::move(p.job);
    s.request = std::move(p.request);
    // At least the prompt's last token is evaluated: its logits are the first sample's.
    const size_t keep = std::min(best_common, s.job.prompt.size() - 1);
    s.cached.resize(keep);
    s.fed = keep;
    s.cached_prefix = static_cast<int>(keep);
    s.generated = 0;
    s.next = -1;
    s.sampler = std::make_unique<model::Sampler>(s.job.sampler);
    accept_prompt_tail(*s.sampler, s.job.prompt);  // the penalties look back over the prompt too
    s.text = TextStream(s.job.stop);
    s.out = Event{};
    s.admitted = Clock::now();
    s.first_token = s.admitted;
    // What the slot can still hold: the prompt, then tokens fed back.
    s.job.max_tokens = static_cast<int>(
        std::min<int64_t>(s.job.max_tokens, slot_ctx_ - static_cast<int64_t>(s.job.prompt.size()) + 1));
    metrics_.queue_length = queue_.size();
  }
  int busy = 0;
  for (auto& s : slots_) busy += s->busy() ? 1 : 0;
  metrics_.slots_busy = busy;
}

bool Engine::idle(const Slot& s) const { return !s.stepping; }

bool Engine::build(int group, bool all) {
  Group& g = groups_[static_cast<size_t>(group)];
  g.batch.clear();
  g.rows.clear();
  g.members.clear();
  g.prompt_tokens = 0;
  auto mine = [&](const auto& s) { return s->busy() && !s->stepping && (all || s->index % n_groups_ == group); };
  for (auto& s : slots_)  // a request for no tokens ends before any compute
    if (mine(s) && s->job.max_tokens == 0) finish(*s, "length");
  // Decode tokens first (one per generating slot), then prompt chunks
  // within the step's budget.
  for (auto& s : slots_) {
    if (!mine(s) || !s->prefilled()) continue;
    g.batch.push_back({s->next, static_cast<int32_t>(s->cached.size()), s->index, true});
    s->cached.push_back(s->next);
    g.rows.push_back(s.get());
    g.members.push_back(s.get());
  }
  int budget = options_.batch_tokens;
  for (auto& s : slots_) {
    if (!mine(s) || s->prefilled() || budget == 0) continue;
    const size_t chunk = std::min(s->job.prompt.size() - s->fed, static_cast<size_t>(budget));
    for (size_t i = 0; i < chunk; ++i, ++s->fed) {
      const bool last = s->fed + 1 == s->job.prompt.size();
      g.batch.push_back({s->job.prompt[s->fed], static_cast<int32_t>(s->cached.size()), s->index, last});
      s->cached.push_back(s->job.prompt[s->fed]);
      if (last) g.rows.push_back(s.get());
    }
    budget -= static_cast<int>(chunk);
    g.prompt_tokens += chunk;
    if (chunk > 0) g.members.push_back(s.get());
  }
  if (g.batch.empty()) return false;
  // A step of prompt chunks alone still returns one row (dropped).
  if (g.rows.empty()) {
    g.batch.back().logits = true;
    g.rows.push_back(nullptr);
  }
  return true;
}

void Engine::emit_token(Slot& s, std::span<const float> row) {
  const Job& job = s.job;
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  // The penalties are the sampler's (it reads row, never writes it), so
  // the logprobs are the model's own distribution.
  int32_t token;
  try {
    token = static_cast<int32_t>(s.sampler->sample(row));
  } catch (const std::exception& e) {
    finish(s, "error", e.what());
    return;
  }
  s.sampler->accept(token);
  if (s.generated == 0) s.first_token = Clock::now();
  const model::Tokenizer& tok = session_.tokenizer();
  if (!job.ignore_eos && tok.is_end_of_generation(token)) {
    finish(s, "stop");
    return;
  }
  if (job.top_logprobs >= 0) {
    logprobs_of(row, token, job.top_logprobs, chosen, top);
    s.out.chosen.push_back(chosen);
    s.out.top.push_back(std::move(top));
  }
  ++s.generated;
  s.next = token;
  s.out.tokens.push_back(token);
  std::string piece;
  try {
    piece = tok.decode_token(token);  // a file whose vocabulary outgrows its tokenizer has ids without text
  } catch (const std::exception& e) {
    finish(s, "error", e.what());
    return;
  }
  const bool stopped = s.text.append(piece);
  if (stopped) {
    finish(s, "stop");
    return;
  }
  std::string ready = s.text.take_ready();
  if (!ready.empty()) {
    Event e = std::move(s.out);
    s.out = Event{};
    e.text = std::move(ready);
    s.request->push(std::move(e));
  }
  if (s.generated >= job.max_tokens || static_cast<int64_t>(s.cached.size()) >= slot_ctx_) finish(s, "length");
}

void Engine::finish(Slot& s, const std::string& reason, const std::string& error) {
  const Clock::time_point now = Clock::now();
  Event e = std::move(s.out);
  s.out = Event{};
  e.text = s.text.take_all();
  e.finished = true;
  e.finish_reason = reason;
  e.error = error;
  e.prompt_tokens = static_cast<int>(s.job.prompt.size());
  e.completion_tokens = s.generated;
  e.cached_tokens = s.cached_prefix;
  e.prompt_seconds = seconds_between(s.admitted, s.first_token);
  e.decode_seconds = s.generated > 0 ? seconds_between(s.first_token, now) : 0;
  std::shared_ptr<Request> request = std::move(s.request);
  s.sampler.reset();
  {
    // Counted before the client hears: metrics() read after the finished
    // event includes this request.
    std::lock_guard<std::mutex> lock(mu_);
    if (reason == "cancelled" || reason == "timeout")
      ++metrics_.requests_cancelled;
    else if (reason == "error")
      ++metrics_.requests_failed;
    else
      ++metrics_.requests_finished;
    int busy = 0;
    for (auto& slot : slots_) busy += slot->busy() ? 1 : 0;
    metrics_.slots_busy = busy;
  }
  request->push(std::move(e));
}

}  // namespace weft::serve
