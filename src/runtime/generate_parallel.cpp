// Several sequences decoded together, their steps pipelined over the
// devices (run_parallel_generation, include/weft/runtime/generate.h).
#include <algorithm>
#include <chrono>
#include <string>

#include "generate_step.h"
#include "weft/core/error.h"
#include "weft/runtime/generate.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kWhere = "generate";

struct Sequence {
  model::Sampler sampler;
  GenerateResult result;
  int64_t n_past = 0;  // the next token's position
  bool prompted = false;  // its prompt's logits came
};

// One group's step: the tokens it carries, and whose each logit row is.
struct Group {
  std::vector<model::BatchToken> batch;
  std::vector<int> rows_of;  // sequence of each logit row, in batch order
  bool in_flight = false;
};

}  // namespace

std::vector<GenerateResult> run_parallel_generation(const BatchedEval& eval, const GenerationModel& model,
                                                    std::span<const std::vector<int32_t>> prompts,
                                                    const GenerateOptions& options,
                                                    const SequenceTokenCallback& on_token) {
  if (prompts.empty()) fail(ErrorKind::invalid_input, kWhere, "no prompts");
  if (options.max_tokens < 0)
    fail(ErrorKind::invalid_input, kWhere, "max_tokens " + std::to_string(options.max_tokens) + " (>= 0)");
  if (model.n_vocab <= 0) fail(ErrorKind::invalid_input, kWhere, "a model without a vocabulary");
  if (eval.slots < 1) fail(ErrorKind::invalid_input, kWhere, "a batched eval without slots");
  if (options.start != 0)
    fail(ErrorKind::invalid_input, kWhere, "start " + std::to_string(options.start) + ": parallel sequences begin at 0");
  const int64_t n_seq = static_cast<int64_t>(prompts.size());
  const int64_t seq_ctx = model.n_ctx / n_seq;
  if (seq_ctx <= 0 || model.n_ctx % n_seq != 0)
    fail(ErrorKind::invalid_input, kWhere,
         std::to_string(n_seq) + " sequences do not divide the context of " + std::to_string(model.n_ctx));
  for (size_t s = 0; s < prompts.size(); ++s) {
    if (prompts[s].empty()) fail(ErrorKind::invalid_input, kWhere, "prompt " + std::to_string(s) + " is empty");
    if (static_cast<int64_t>(prompts[s].size()) > seq_ctx)
      fail(ErrorKind::invalid_input, kWhere,
           "prompt " + std::to_string(s) + " of " + std::to_string(prompts[s].size()) +
               " tokens exceeds its part of the context, " + std::to_string(seq_ctx) + " positions");
  }

  std::vector<Sequence> seqs;
  seqs.reserve(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    model::SamplerOptions so = options.sampler;
    so.seed += s;
    seqs.push_back({model::Sampler(so), {}, static_cast<int64_t>(prompts[s].size())});
    accept_prompt_tail(seqs.back().sampler, prompts[s]);
  }
  const int n_groups = static_cast<int>(std::min<int64_t>(eval.slots, n_seq));
  std::vector<Group> groups(static_cast<size_t>(n_groups));
  for (int s = 0; s < n_seq; ++s) {  // each group's first step: its sequences' prompts
    Group& g = groups[static_cast<size_t>(s % n_groups)];
    const auto& p = prompts[static_cast<size_t>(s)];
    for (size_t i = 0; i < p.size(); ++i)
      g.batch.push_back({p[i], static_cast<int32_t>(i), s, i + 1 == p.size()});
    g.rows_of.push_back(s);
  }
  const auto t0 = Clock::now();
  auto seconds = [&t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  for (int k = 0; k < n_groups; ++k) {
    eval.submit(k, groups[static_cast<size_t>(k)].batch, n_seq);
    groups[static_cast<size_t>(k)].in_flight = true;
  }

  std::vector<float> logits;
  for (bool any = true; any;) {
    any = false;
    for (int k = 0; k < n_groups; ++k) {
      Group& g = groups[static_cast<size_t>(k)];
      if (!g.in_flight) continue;
      eval.finish(k, logits);
      g.in_flight = false;
      if (logits.size() != g.rows_of.size() * static_cast<size_t>(model.n_vocab))
        fail(ErrorKind::invalid_input, kWhere,
             "a step returned " + std::to_string(logits.size()) + " logits for " + std::to_string(g.rows_of.size()) +
                 " rows of a " + std::to_string(model.n_vocab) + "-token vocabulary");
      g.batch.clear();
      std::vector<int> next_rows;
      for (size_t row = 0; row < g.rows_of.size(); ++row) {
        const int s = g.rows_of[row];
        Sequence& q = seqs[static_cast<size_t>(s)];
        if (!q.prompted) {
          q.prompted = true;
          q.result.prompt_seconds = seconds();
        }
        if (options.max_tokens == 0) {  // the prompt alone
          q.result.total_seconds = q.result.prompt_seconds;
          continue;
        }
        const std::span<const float> row_logits(logits.data() + row * static_cast<size_t>(model.n_vocab),
                                                static_cast<size_t>(model.n_vocab));
        const int32_t next = q.sampler.sample(row_logits);
        const TokenCallback emit = on_token ? TokenCallback([&on_token, s](int32_t t) { return on_token(s, t); })
                                            : TokenCallback();
        if (auto stop = detail::take_token(next, q.n_past, seq_ctx, model, options, q.sampler, q.result, emit)) {
          q.result.stop = *stop;
          q.result.total_seconds = seconds();
          continue;
        }
        g.batch.push_back({next, static_cast<int32_t>(q.n_past++), s, true});
        next_rows.push_back(s);
      }
      g.rows_of = std::move(next_rows);
      if (!g.batch.empty()) {
        eval.submit(k, g.batch, n_seq);
        g.in_flight = true;
        any = true;
      }
    }
    for (const Group& g : groups) any = any || g.in_flight;
  }
  std::vector<GenerateResult> out;
  out.reserve(seqs.size());
  for (Sequence& q : seqs) out.push_back(std::move(q.result));
  return out;
}

}  // namespace weft
