// The serving engine's thread: the queue, admission into the BatchEngine's
// slots, and the text each request receives (engine.h).
#include "serve/engine.h"

#include <algorithm>
#include <cmath>

#include "serve/text_stream.h"
#include "weft/core/error.h"

namespace weft::serve {

namespace {

constexpr const char* kEngineWhere = "serve";
// How often an idle engine with a device missing asks whether it is back.
constexpr auto kRejoinPoll = std::chrono::milliseconds(500);

using Clock = std::chrono::steady_clock;

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

// A running request: what the BatchEngine's steps hand it becomes text,
// logprobs and, at the end, the finished event. Engine thread only.
class Engine::Active final : public BatchSink {
 public:
  Active(Engine& engine, Pending p)
      : engine_(engine), job_(std::move(p.job)), request_(std::move(p.request)), text_(job_.stop) {}

  bool on_token(int32_t token, std::span<const float> row) override {
    if (job_.top_logprobs >= 0) {
      TokenLogprob chosen;
      std::vector<TokenLogprob> top;
      logprobs_of(row, token, job_.top_logprobs, chosen, top);
      out_.chosen.push_back(chosen);
      out_.top.push_back(std::move(top));
    }
    out_.tokens.push_back(token);
    // A file whose vocabulary outgrows its tokenizer has ids without text:
    // decode_token throws, and the request ends with the error.
    const model::Tokenizer& tok = engine_.session_.tokenizer();
    const bool as_text = std::find(job_.text_tokens.begin(), job_.text_tokens.end(), token) != job_.text_tokens.end();
    if (text_.append(as_text ? tok.token_text(token) : tok.decode_token(token))) return false;  // a stop string
    std::string ready = text_.take_ready();
    if (!ready.empty()) {
      Event e = std::move(out_);
      out_ = Event{};
      e.text = std::move(ready);
      request_->push(std::move(e));
    }
    return true;
  }
  bool cancelled() override { return request_->cancelled() || Clock::now() >= job_.deadline; }
  void on_finish(const BatchEnd& end) override {
    Event e = std::move(out_);
    out_ = Event{};
    e.text = text_.take_all();
    e.finished = true;
    e.finish_reason = reason(end.stop);
    e.error = end.error;
    e.prompt_tokens = end.prompt_tokens;
    e.completion_tokens = end.generated;
    e.cached_tokens = end.cached_tokens;
    e.prompt_seconds = end.prompt_seconds;
    e.decode_seconds = end.generated > 0 ? end.total_seconds - end.prompt_seconds : 0;
    e.drafted = end.drafted;
    e.accepted = end.accepted;
    // Counted before the client hears: metrics() read after the finished
    // event includes this request.
    engine_.count_finish(e.finish_reason);
    request_->push(std::move(e));
    done = true;
  }
  bool done = false;

 private:
  std::string reason(StopReason stop) const {
    switch (stop) {
      case StopReason::max_tokens:
      case StopReason::context_full: return "length";
      case StopReason::end_of_generation:
      case StopReason::stop_token:
      case StopReason::callback: return "stop";  // callback: a stop string
      case StopReason::cancelled:
        return !request_->cancelled() && Clock::now() >= job_.deadline ? "timeout" : "cancelled";
      case StopReason::failed: return "error";
    }
    return "error";
  }

  Engine& engine_;
  Job job_;
  std::shared_ptr<Request> request_;
  TextStream text_;
  Event out_;  // tokens (and logprobs) not yet handed over with text
};

namespace {

Session& loaded(Session& s) {
  if (!s.loaded()) fail(ErrorKind::invalid_input, kEngineWhere, "the engine needs a loaded session");
  return s;
}

BatchEngineOptions batch_options(const EngineOptions& o) {
  BatchEngineOptions b;
  b.slots = o.slots;
  b.batch_tokens = o.batch_tokens;
  b.pipelined = o.pipelined;
  b.decode_together = true;
  if (o.draft) {
    if (!o.draft->loaded()) fail(ErrorKind::invalid_input, kEngineWhere, "the engine needs a loaded draft session");
    Session* draft = o.draft;
    b.draft.eval = [draft](std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits) {
      logits = draft->eval(tokens, n_past, model::LogitRows::last);
    };
    b.draft.model = draft->generation_model();
    b.draft.draft_max = o.draft_max;
  }
  return b;
}

BatchJob batch_job(const Job& job, const std::shared_ptr<const model::TokenTrie>& trie) {
  BatchJob b;
  if (job.grammar) {
    b.options.grammar = job.grammar;
    b.options.token_trie = trie;
  }
  b.prompt = job.prompt;
  b.options.max_tokens = job.max_tokens;
  b.options.sampler = job.sampler;
  b.options.stop_at_end_of_generation = !job.ignore_eos;
  return b;
}

}  // namespace

Engine::Engine(Session& session, EngineOptions options)
    : session_(session),
      options_(options),
      batch_(loaded(session).batched_eval(), session.generation_model(), batch_options(options)),
      trie_(model::TokenTrie::from_tokenizer(session.tokenizer())) {
  metrics_.slots = options_.slots;
  metrics_.groups = batch_.groups();
  copy_placement();
  rebase_device_times();
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
  thread_.join();  // the thread cancels what it was running
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : queue_) {
    Event e;
    e.finished = true;
    e.finish_reason = "cancelled";
    p.request->push(std::move(e));
  }
  queue_.clear();
  for (auto& [job, request] : embed_queue_) request->set(EmbedResult{.error = "cancelled"});
  embed_queue_.clear();
  metrics_.queue_length = 0;
  for (WorkersToAdd& w : workers_to_add_) w.done.set_value("the server stopped: nothing added");
  workers_to_add_.clear();
}

std::shared_ptr<Request> Engine::submit(Job job) {
  std::vector<Job> one;
  one.push_back(std::move(job));
  std::vector<std::shared_ptr<Request>> r = submit_group(std::move(one));
  return r.empty() ? nullptr : std::move(r[0]);
}

std::vector<std::shared_ptr<Request>> Engine::submit_group(std::vector<Job> jobs) {
  if (jobs.empty()) fail(ErrorKind::invalid_input, kEngineWhere, "a group of no jobs");
  if (session_.params().encoder)
    fail(ErrorKind::invalid_input, kEngineWhere,
         "this model (" + session_.params().arch_name +
             ") is an encoder: it has no output matrix, so it serves embeddings (/v1/embeddings, /api/embed), "
             "not generation");
  for (const Job& job : jobs) batch_.check(batch_job(job, trie_));  // throws naming what is wrong
  std::vector<std::shared_ptr<Request>> requests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) fail(ErrorKind::disconnected, kEngineWhere, "the server is stopping");
    // Free slots take requests at once; beyond them max_queue may wait.
    const size_t free_slots = static_cast<size_t>(metrics_.slots - metrics_.slots_busy);
    if (queue_.size() + embed_queue_.size() + jobs.size() > options_.max_queue + free_slots) {
      ++metrics_.requests_rejected;
      return {};
    }
    for (Job& job : jobs) {
      requests.push_back(std::make_shared<Request>());
      queue_.push_back({std::move(job), requests.back()});
    }
    metrics_.queue_length = queue_.size() + embed_queue_.size();
  }
  cv_.notify_all();
  return requests;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void Engine::run() {
  uint64_t recovered_at = batch_.counters().recoveries;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto work = [&] { return stop_ || !queue_.empty() || !embed_queue_.empty() || batch_.busy(); };
      const auto woken = [&] { return work() || !workers_to_add_.empty(); };
      // While a device is missing (lost, or added and not yet in), the idle
      // engine looks for it every kRejoinPoll (the probes themselves run on
      // the Session's watch).
      if (metrics_.devices_lost.empty() && metrics_.devices_joining.empty() && metrics_.devices_leaving.empty())
        cv_.wait(lock, woken);
      else cv_.wait_for(lock, kRejoinPoll, woken);
      if (stop_) break;
      const bool idle = !work();
      lock.unlock();
      add_pending_workers();
      if (idle) {
        rejoin();
        continue;
      }
    }
    // A step that throws (a worker died; an allocation failed) ends the
    // busy requests, not the process, unless the model recovers; the
    // BatchEngine forgets every slot's cache (its state is unknown).
    try {
      step();
    } catch (const std::exception& e) {
      // With SessionOptions::recover, a lost worker's share is placed again
      // over the devices left and the requests go on where they were.
      const bool recovered = batch_.recover(e);
      std::string error = e.what();
      if (!batch_.recovery_error().empty()) error += "; recovery failed: " + batch_.recovery_error();
      if (!recovered) batch_.fail_all(error);
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.last_error = error;
      if (recovered) {
        ++metrics_.recoveries;
        metrics_.groups = batch_.groups();
        copy_placement();
      }
    }
    if (recovered_at != batch_.counters().recoveries) {  // a new placement: its own times
      rebase_device_times();
      recovered_at = batch_.counters().recoveries;
    }
    reap();
    if (!batch_.busy() && !batch_.stepping()) measure_device_times();  // nothing in flight: a round trip each
  }
  batch_.cancel_all();
  reap();
}

std::future<std::string> Engine::add_workers(std::vector<DeviceSpec> specs) {
  return change_workers(std::move(specs), false);
}

std::future<std::string> Engine::remove_workers(std::vector<DeviceSpec> specs) {
  return change_workers(std::move(specs), true);
}

std::future<std::string> Engine::change_workers(std::vector<DeviceSpec> specs, bool remove) {
  WorkersToAdd w{std::move(specs), {}, remove};
  std::future<std::string> done = w.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      w.done.set_value(remove ? "the server is stopping: nothing removed" : "the server is stopping: nothing added");
      return done;
    }
    workers_to_add_.push_back(std::move(w));
  }
  cv_.notify_all();
  return done;
}

void Engine::add_pending_workers() {
  std::vector<WorkersToAdd> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(workers_to_add_);
  }
  if (pending.empty()) return;
  for (WorkersToAdd& w : pending) {
    if (w.remove) {
      try {
        const std::vector<std::string> removed = session_.remove_workers(w.specs);
        std::string names;
        for (const std::string& r : removed) names += (names.empty() ? "" : ", ") + r;
        w.done.set_value(removed.empty() ? "no worker removed (none is a device)"
                                         : std::to_string(removed.size()) +
                                               " worker(s) removed, a placed one taken out when idle: " + names);
      } catch (const std::exception& e) {
        w.done.set_value(std::string("nothing removed: ") + e.what());
      }
      continue;
    }
    try {
      const std::vector<std::string> added = session_.add_workers(w.specs);
      std::string names;
      for (const std::string& a : added) names += (names.empty() ? "" : ", ") + a;
      w.done.set_value(added.empty() ? "no new worker (each is a device already)"
                                     : std::to_string(added.size()) + " new worker(s), taken in when idle once they answer: " + names);
    } catch (const std::exception& e) {
      w.done.set_value(std::string("nothing added: ") + e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  copy_placement();
}

void Engine::depart() {
  std::string error;
  const uint64_t recoveries = batch_.counters().recoveries;
  bool moved = false;
  try {
    const int slots = session_.depart_idle();
    if (slots > 0) batch_.placement_replaced(slots);
    moved = slots > 0;
  } catch (const std::exception& e) {  // the load without them failed part-way: placed again as after a loss
    if (!batch_.recover(e))
      error = "taking a removed worker out failed: " + std::string(e.what()) +
              (batch_.recovery_error().empty() ? "" : "; recovery failed: " + batch_.recovery_error());
  }
  if (moved || batch_.counters().recoveries != recoveries) rebase_device_times();  // a new placement
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) metrics_.last_error = error;
  metrics_.recoveries += batch_.counters().recoveries - recoveries;
  metrics_.groups = batch_.groups();
  copy_placement();
}

void Engine::rejoin() {
  if (!session_.leaving_devices().empty()) depart();
  bool moved = false;
  std::string error;
  const uint64_t recoveries = batch_.counters().recoveries;  // a move that fails part-way recovers
  try {
    moved = batch_.rejoin();
  } catch (const std::exception& e) {  // the move and the recovery after it failed: the model is gone
    error = e.what();
  }
  if (moved || batch_.counters().recoveries != recoveries) rebase_device_times();  // a new placement
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) metrics_.last_error = error;
  if (moved) ++metrics_.rejoins;
  metrics_.recoveries += batch_.counters().recoveries - recoveries;
  metrics_.groups = batch_.groups();
  copy_placement();
}

void Engine::rebase_device_times() {
  compute_base_ = session_.compute_stats();
  compute_base_steps_ = measured_at_steps_ = batch_.counters().steps;
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.device_ms_per_step.clear();
}

void Engine::measure_device_times() {
  const uint64_t steps = batch_.counters().steps;
  if (steps == measured_at_steps_) return;  // nothing ran since the last measure
  measured_at_steps_ = steps;
  const std::vector<DeviceCompute> now = session_.compute_stats();
  if (now.size() != compute_base_.size() || steps <= compute_base_steps_) return;
  std::vector<double> ms(now.size(), -1.0);
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i].seconds >= 0 && compute_base_[i].seconds >= 0)
      ms[i] = (now[i].seconds - compute_base_[i].seconds) * 1e3 / static_cast<double>(steps - compute_base_steps_);
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.device_ms_per_step = std::move(ms);
}

void Engine::copy_placement() {
  metrics_.devices_lost = session_.lost_devices();
  metrics_.devices_joining = session_.joining_devices();
  metrics_.devices_leaving = session_.leaving_devices();
  metrics_.plan = session_.loaded_plan();
  metrics_.device_specs = session_.device_specs();
}

void Engine::step() {
  batch_.collect();  // throws to run()
  embed_queued();    // throws to run()
  admit();
  batch_.launch();   // throws to run()
  std::lock_guard<std::mutex> lock(mu_);
  copy_counters();
}

void Engine::copy_counters() {
  const BatchCounters& c = batch_.counters();
  metrics_.steps = c.steps;
  metrics_.embed_steps = c.embed_steps;
  metrics_.speculative_steps = c.speculative_steps;
  metrics_.drafted = c.drafted;
  metrics_.accepted = c.accepted;
  metrics_.busy_seconds = c.busy_seconds;
  metrics_.grammar_seconds = c.grammar_seconds;
  metrics_.prompt_tokens = c.prompt_tokens;
  metrics_.generated_tokens = c.generated_tokens;
}

void Engine::admit() {
  const Clock::time_point now = Clock::now();
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
  while (!queue_.empty() && batch_.has_free_slot()) {
    BatchJob job = batch_job(queue_.front().job, trie_);
    active_.push_back(std::make_unique<Active>(*this, std::move(queue_.front())));
    queue_.pop_front();
    batch_.start(std::move(job), active_.back().get());  // checked at submit
  }
  metrics_.queue_length = queue_.size() + embed_queue_.size();
  metrics_.slots_busy = batch_.slots_busy();
}

void Engine::reap() {
  std::erase_if(active_, [](const std::unique_ptr<Active>& a) { return a->done; });
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.slots_busy = batch_.slots_busy();
}

void Engine::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason == "cancelled" || reason == "timeout")
    ++metrics_.requests_cancelled;
  else if (reason == "error")
    ++metrics_.requests_failed;
  else
    ++metrics_.requests_finished;
  metrics_.slots_busy = batch_.slots_busy();
  copy_counters();  // the tokens and drafts of the step that ended it, before the client hears

}

}  // namespace weft::serve
