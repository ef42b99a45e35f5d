// The batched-generation engine: slots, admission by shared prefix, steps
// built and pipelined over the groups, sampling (batch_engine.h).
#include "weft/runtime/batch_engine.h"

#include <algorithm>
#include <optional>

#include "batch_slot.h"
#include "generate_step.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kBatchEngineWhere = "batch";

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

BatchEngine::BatchEngine(BatchedEval eval, GenerationModel model, BatchEngineOptions options)
    : eval_(std::move(eval)), model_(std::move(model)), options_(options) {
  if (options_.slots < 1 || model_.n_ctx <= 0 || model_.n_ctx % options_.slots != 0)
    fail(ErrorKind::invalid_input, kBatchEngineWhere,
         std::to_string(options_.slots) + " sequences do not divide the context of " + std::to_string(model_.n_ctx));
  if (options_.batch_tokens < 1) fail(ErrorKind::invalid_input, kBatchEngineWhere, "batch_tokens must be at least 1");
  if (model_.n_vocab <= 0) fail(ErrorKind::invalid_input, kBatchEngineWhere, "a model without a vocabulary");
  if (eval_.slots < 1 || !eval_.submit || !eval_.finish)
    fail(ErrorKind::invalid_input, kBatchEngineWhere, "a batched eval without slots");
  slot_ctx_ = model_.n_ctx / options_.slots;
  check_draft();
  for (int i = 0; i < options_.slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->index = i;
  }
  set_groups_recovering(eval_.slots);
}

void BatchEngine::set_groups(int model_slots) {
  n_groups_ = options_.pipelined ? std::max(1, std::min(model_slots, options_.slots)) : 1;
  groups_.assign(static_cast<size_t>(n_groups_), Group{});
  if (n_groups_ > 1 && eval_.reserve) eval_.reserve(options_.batch_tokens + options_.slots, options_.slots + 1);
}

BatchEngine::~BatchEngine() {
  try {
    drain();
  } catch (...) {  // drain() swallows the model's errors; nothing else throws
  }
}

void BatchEngine::check(const BatchJob& job) const {
  if (job.prompt.empty()) fail(ErrorKind::invalid_input, kBatchEngineWhere, "the prompt is empty");
  if (static_cast<int64_t>(job.prompt.size()) > slot_ctx_)
    fail(ErrorKind::invalid_input, kBatchEngineWhere,
         "the prompt's " + std::to_string(job.prompt.size()) + " tokens do not fit a slot's context of " +
             std::to_string(slot_ctx_) + " positions");
  for (int32_t t : job.prompt)
    if (t < 0 || t >= model_.n_vocab)
      fail(ErrorKind::invalid_input, kBatchEngineWhere,
           "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(model_.n_vocab));
  if (job.options.max_tokens < 0)
    fail(ErrorKind::invalid_input, kBatchEngineWhere,
         "max_tokens " + std::to_string(job.options.max_tokens) + " (>= 0)");
  if (job.options.start != 0)
    fail(ErrorKind::invalid_input, kBatchEngineWhere,
         "start " + std::to_string(job.options.start) + ": a batched sequence begins at its slot's position 0");
  model::Sampler sampler(job.options.sampler);  // throws naming an impossible option
  detail::GrammarStep grammar(job.options, model_.n_vocab);  // throws for a grammar without the model's trie
}

bool BatchEngine::has_free_slot() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return !s->busy() && !s->stepping; });
}

void BatchEngine::start(BatchJob job, BatchSink* sink) {
  check(job);
  if (!sink) fail(ErrorKind::invalid_input, kBatchEngineWhere, "a job without a sink");
  // The free slot sharing the longest prefix with the prompt; among equals
  // the one with the fewest cached tokens to lose, then the lowest.
  Slot* best = nullptr;
  size_t best_common = 0;
  for (auto& s : slots_) {
    if (s->busy() || s->stepping) continue;
    const size_t common = common_prefix(s->cached, job.prompt);
    if (!best || common > best_common || (common == best_common && s->cached.size() < best->cached.size()))
      best = s.get(), best_common = common;
  }
  if (!best) fail(ErrorKind::invalid_input, kBatchEngineWhere, "no slot is free");
  Slot& s = *best;
  s.job = std::move(job);
  s.sink = sink;
  s.feed = s.job.prompt;
  // At least the prompt's last token is evaluated: its logits are the first sample's.
  const size_t keep = std::min(best_common, s.job.prompt.size() - 1);
  s.cached.resize(keep);
  s.fed = keep;
  s.cached_prefix = static_cast<int>(keep);
  s.next = -1;
  s.prompted = false;
  s.sampler.emplace(s.job.options.sampler);
  s.grammar.emplace(s.job.options, model_.n_vocab);
  accept_prompt_tail(*s.sampler, s.job.prompt);  // the penalties look back over the prompt too
  s.rng.seed(s.job.options.sampler.seed ^ 0x5eed5eed5eed5eedULL);
  s.drafted = s.accepted = 0;
  s.result = GenerateResult{};
  s.started = Clock::now();
  s.prompt_done = s.started;
  s.timed = s.replaying = false;
}

std::optional<std::vector<std::vector<float>>> BatchEngine::hidden_states(std::span<const std::vector<int32_t>> inputs,
                                                                          const std::function<bool()>& stop) {
  if (inputs.empty()) fail(ErrorKind::invalid_input, kBatchEngineWhere, "hidden states of no inputs");
  for (const std::vector<int32_t>& tokens : inputs) {
    BatchJob probe;
    probe.prompt = tokens;
    check(probe);  // empty, too long, outside the vocabulary
  }
  if (!eval_.hidden)
    fail(ErrorKind::invalid_input, kBatchEngineWhere, "this model's batched eval gives no hidden states");
  if (!in_flight_.empty()) fail(ErrorKind::invalid_input, kBatchEngineWhere, "hidden states while a step is in flight");
  std::vector<Slot*> free;
  for (auto& s : slots_)
    if (!s->busy() && !s->stepping) free.push_back(s.get());
  if (free.empty()) fail(ErrorKind::invalid_input, kBatchEngineWhere, "no slot is free");
  std::stable_sort(free.begin(), free.end(),
                   [](const Slot* a, const Slot* b) { return a->cached.size() < b->cached.size(); });
  std::vector<std::vector<float>> out(inputs.size());
  for (size_t first = 0; first < inputs.size(); first += free.size()) {
    const size_t count = std::min(free.size(), inputs.size() - first);
    for (size_t k = 0; k < count; ++k) free[k]->cached.clear();  // overwritten below; unknown if a step throws
    if (!embed_group(inputs.subspan(first, count), free, std::span(out).subspan(first, count), stop))
      return std::nullopt;
    for (size_t k = 0; k < count; ++k) free[k]->cached = inputs[first + k];
  }
  return out;
}

bool BatchEngine::embed_group(std::span<const std::vector<int32_t>> inputs, std::span<Slot* const> slots,
                              std::span<std::vector<float>> out, const std::function<bool()>& stop) {
  std::vector<size_t> done(inputs.size(), 0);
  std::vector<size_t> owner;
  std::vector<model::BatchToken> batch;
  std::vector<float> part;
  const auto budget = static_cast<size_t>(options_.batch_tokens);
  for (;;) {
    batch.clear();
    owner.clear();
    for (size_t k = 0; k < inputs.size(); ++k) {
      const size_t left = inputs[k].size() - done[k];
      // An encoder's input goes whole (into a step of its own when it
      // does not fit beside the others); a decoder's continues in pieces.
      size_t m = std::min(left, budget - std::min(budget, batch.size()));
      if (model_.encoder) m = left <= budget - std::min(budget, batch.size()) || batch.empty() ? left : 0;
      for (size_t i = done[k]; i < done[k] + m; ++i) {
        batch.push_back({inputs[k][i], static_cast<int32_t>(i), slots[k]->index, true});
        owner.push_back(k);
      }
    }
    if (batch.empty()) return true;
    if (stop && stop()) return false;
    eval_.hidden(batch, options_.slots, part);  // throws to the driver
    if (part.empty() || part.size() % batch.size() != 0)
      fail(ErrorKind::invalid_input, kBatchEngineWhere,
           "a step returned " + std::to_string(part.size()) + " hidden values for " + std::to_string(batch.size()) +
               " tokens");
    const size_t width = part.size() / batch.size();
    for (size_t j = 0; j < batch.size(); ++j) {
      out[owner[j]].insert(out[owner[j]].end(), part.begin() + static_cast<std::ptrdiff_t>(j * width),
                           part.begin() + static_cast<std::ptrdiff_t>((j + 1) * width));
      ++done[owner[j]];
    }
    counters_.prompt_tokens += batch.size();
    ++counters_.embed_steps;
  }
}

bool BatchEngine::busy() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); });
}

int BatchEngine::slots_busy() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy(); }));
}

bool BatchEngine::advance() {
  const bool collected = collect();
  const bool launched = launch();
  return collected || launched;
}

bool BatchEngine::collect() {
  bool worked = false;
  if (!in_flight_.empty()) {
    const Clock::time_point t0 = Clock::now();
    const int k = in_flight_.front();
    Group& g = groups_[static_cast<size_t>(k)];
    in_flight_.pop_front();
    end_step(g);
    eval_.finish(k, logits_);  // throws to the driver
    const size_t vocab = static_cast<size_t>(model_.n_vocab);
    if (logits_.size() != g.rows.size() * vocab)
      fail(ErrorKind::invalid_input, kBatchEngineWhere,
           "a step returned " + std::to_string(logits_.size()) + " logits for " + std::to_string(g.rows.size()) +
               " rows of a " + std::to_string(vocab) + "-token vocabulary");
    if (speculating_) {
      Slot* s = speculating_;
      speculating_ = nullptr;
      take_speculative_rows(*s, logits_);
    } else {
      for (size_t r = 0; r < g.rows.size(); ++r)
        if (g.rows[r]) take_row(*g.rows[r], std::span<const float>(&logits_[r * vocab], vocab));
    }
    counters_.prompt_tokens += g.prompt_tokens;
    ++counters_.steps;
    counters_.busy_seconds += seconds_between(t0, Clock::now());
    worked = true;
  }
  for (auto& s : slots_)
    if (s->busy() && !s->stepping && s->sink->cancelled()) end(*s, StopReason::cancelled);
  return worked;
}

bool BatchEngine::launch() {
  const Clock::time_point t0 = Clock::now();
  bool worked = false;
  const bool prompts =
      std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy() && !s->prefilled(); });
  if (n_groups_ > 1 && (prompts || !options_.decode_together)) {
    for (int k = 0; k < n_groups_; ++k) {
      if (groups_[static_cast<size_t>(k)].in_flight || !build(k, false)) continue;
      submit_step(k);
      worked = true;
    }
  } else if (in_flight_.empty()) {  // one step of every slot, once the others are done
    // A lone generating sequence with a draft: a speculative round.
    int k = 0;
    Slot* lone = speculative_slot(k);
    if (lone) build_speculative(*lone, k);
    if (lone || build(0, true)) {
      submit_step(0);
      worked = true;
    }
  }
  if (worked) counters_.busy_seconds += seconds_between(t0, Clock::now());
  return worked;
}

bool BatchEngine::build(int group, bool all) {
  Group& g = groups_[static_cast<size_t>(group)];
  g.batch.clear();
  g.rows.clear();
  g.members.clear();
  g.prompt_tokens = 0;
  auto mine = [&](const auto& s) { return s->busy() && !s->stepping && (all || s->index % n_groups_ == group); };
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
    const size_t chunk = std::min(s->feed.size() - s->fed, static_cast<size_t>(budget));
    for (size_t i = 0; i < chunk; ++i, ++s->fed) {
      const bool last = s->fed + 1 == s->feed.size();
      g.batch.push_back({s->feed[s->fed], static_cast<int32_t>(s->cached.size()), s->index, last});
      s->cached.push_back(s->feed[s->fed]);
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

void BatchEngine::submit_step(int group) {
  Group& g = groups_[static_cast<size_t>(group)];
  eval_.submit(group, g.batch, static_cast<int64_t>(slots_.size()));  // throws to the driver
  g.in_flight = true;
  for (Slot* s : g.members) s->stepping = true;
  in_flight_.push_back(group);
}

void BatchEngine::end_step(Group& g) {
  g.in_flight = false;
  for (Slot* s : g.members) s->stepping = false;
}

void BatchEngine::drain() {
  speculating_ = nullptr;  // its logits dropped with the step's
  while (!in_flight_.empty()) {
    const int k = in_flight_.front();
    in_flight_.pop_front();
    end_step(groups_[static_cast<size_t>(k)]);
    try {
      eval_.finish(k, logits_);
    } catch (const std::exception&) {  // the model abandoned the rest: nothing is in flight
      while (!in_flight_.empty()) {
        end_step(groups_[static_cast<size_t>(in_flight_.front())]);
        in_flight_.pop_front();
      }
    }
  }
}

void BatchEngine::take_row(Slot& s, std::span<const float> row) {
  if (!s.prompted) {
    s.prompted = true;
    s.prompt_done = Clock::now();
  }
  if (s.job.options.max_tokens == 0) {  // the prompt alone
    end(s, StopReason::max_tokens);
    return;
  }
  std::optional<StopReason> stop;
  try {
    const int32_t next = s.grammar->sample(*s.sampler, row);
    BatchSink* sink = s.sink;
    // Two pointers: held inside the std::function, no allocation per token.
    const std::span<const float>* row_at = &row;
    const TokenCallback emit = [sink, row_at](int32_t t) { return sink->on_token(t, *row_at); };
    // The position the token would be evaluated at is the next free row.
    const int64_t n_past = static_cast<int64_t>(s.cached.size());
    stop = detail::take_token(next, n_past, slot_ctx_, model_, s.job.options, *s.sampler, s.result, emit);
    if (!stop && s.grammar->take(next)) stop = StopReason::end_of_generation;  // nothing else may follow
    s.next = next;
  } catch (const std::exception& e) {
    end(s, StopReason::failed, e.what());
    return;
  }
  ++counters_.generated_tokens;
  note_token_time(s);
  if (stop) end(s, *stop);
}

void BatchEngine::end(Slot& s, StopReason stop, const std::string& error) {
  BatchEnd e;
  e.stop = stop;
  e.error = error;
  e.prompt_tokens = static_cast<int>(s.job.prompt.size());
  e.cached_tokens = s.cached_prefix;
  e.generated = static_cast<int>(s.result.tokens.size());
  e.drafted = s.drafted;
  e.accepted = s.accepted;
  const Clock::time_point now = Clock::now();
  e.prompt_seconds = seconds_between(s.started, s.prompted ? s.prompt_done : now);
  e.total_seconds = seconds_between(s.started, now);
  if (s.replaying) note_token_time(s);  // ended before its first token after a replay
  BatchSink* sink = s.sink;
  s.sink = nullptr;
  counters_.grammar_seconds += s.grammar ? s.grammar->seconds() : 0;
  s.sampler.reset();
  s.grammar.reset();
  s.result = GenerateResult{};
  sink->on_finish(e);
}

void BatchEngine::fail_all(const std::string& error) {
  drain();
  draft_cached_.clear();  // a draft that threw: its cache is unknown
  for (auto& s : slots_) {
    s->stepping = false;
    s->cached.clear();
    if (s->busy()) end(*s, StopReason::failed, error);
  }
}

void BatchEngine::cancel_all() {
  drain();
  for (auto& s : slots_)
    if (s->busy()) end(*s, StopReason::cancelled);
}

}  // namespace weft
