// BatchEngine's speculative rounds (weft/runtime/batch_engine.h): while one
// sequence runs alone, a draft model proposes tokens and a step judges them
// all (the rule of weft/runtime/speculative.h, as run_speculative_generation
// applies it to one sequence).
//
// Positions: before a round the slot's cache holds P accepted tokens and
// its next token (sampled, emitted) goes at P. The round's step evaluates
// [next, d1..dk] at P..P+k; its row j judges d(j+1), row k gives the token
// after a run kept whole. The first token the target does not keep from the
// draft is the slot's next; the cache is cut back to the tokens before it
// (the rows after are overwritten by later steps and masked until then:
// model::fill_causal_mask). The draft's cache is tracked as a token list:
// each round it evaluates only what differs from what it holds, so a
// switch between slots, or plain steps in between, costs a re-evaluation
// of the draft, never a wrong proposal.
#include <algorithm>
#include <string>

#include "batch_slot.h"
#include "speculative_draw.h"
#include "weft/core/error.h"
#include "weft/runtime/speculative.h"

namespace weft {
namespace {

constexpr const char* kBatchSpeculativeWhere = "batch";
constexpr int kMaxDraft = static_cast<int>(model::kSlidingRingStep) - 1;  // as run_speculative_generation

using detail::draw_from;
using detail::speculative_uniform;

}  // namespace

void BatchEngine::check_draft() const {
  const BatchDraft& d = options_.draft;
  if (!d.eval) return;
  if (d.draft_max < 1 || d.draft_max > kMaxDraft)
    fail(ErrorKind::invalid_input, kBatchSpeculativeWhere,
         "draft_max " + std::to_string(d.draft_max) + " (1 to " + std::to_string(kMaxDraft) + ")");
  if (d.model.n_vocab != model_.n_vocab)
    fail(ErrorKind::invalid_input, kBatchSpeculativeWhere,
         "the draft model has " + std::to_string(d.model.n_vocab) + " logits per token, the target " +
             std::to_string(model_.n_vocab));
  if (d.model.n_ctx < slot_ctx_)
    fail(ErrorKind::invalid_input, kBatchSpeculativeWhere,
         "the draft's context of " + std::to_string(d.model.n_ctx) + " positions is smaller than a slot's " +
             std::to_string(slot_ctx_));
}

BatchEngine::Slot* BatchEngine::speculative_slot(int& k) const {
  k = 0;
  if (!options_.draft.eval) return nullptr;
  Slot* lone = nullptr;
  for (const auto& s : slots_) {
    if (!s->busy()) continue;
    if (lone) return nullptr;  // two sequences: a plain batched step
    lone = s.get();
  }
  // Generating (its next token sampled).
  if (!lone || lone->stepping || !lone->prefilled() || lone->next < 0) return nullptr;
  // Proposals that can be emitted: one fewer than the tokens left (the
  // target adds its own), and the step's last position must fit the slot.
  const int64_t left = lone->job.options.max_tokens - static_cast<int64_t>(lone->result.tokens.size());
  const int64_t room = slot_ctx_ - static_cast<int64_t>(lone->cached.size()) - 1;
  k = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({options_.draft.draft_max, left - 1, room})));
  return k > 0 ? lone : nullptr;
}

void BatchEngine::propose(Slot& s, int k) {
  drafts_.clear();
  draft_dists_.clear();
  // What the draft must hold: the slot's accepted tokens and its next one.
  std::vector<int32_t> context = s.cached;
  context.push_back(s.next);
  size_t keep = 0;
  while (keep < draft_cached_.size() && keep < context.size() && draft_cached_[keep] == context[keep]) ++keep;
  keep = std::min(keep, context.size() - 1);  // the last token's logits are the first proposal's
  const std::span<const int32_t> unseen(context.data() + keep, context.size() - keep);
  draft_cached_.clear();  // unknown until the draft's evaluations return
  const size_t vocab = static_cast<size_t>(model_.n_vocab);
  auto check_row = [&] {
    if (draft_logits_.size() != vocab)
      fail(ErrorKind::invalid_input, kBatchSpeculativeWhere,
           "the draft's eval returned " + std::to_string(draft_logits_.size()) + " logits for one row of a " +
               std::to_string(vocab) + "-token vocabulary");
  };
  options_.draft.eval(unseen, static_cast<int64_t>(keep), draft_logits_);  // throws to the driver
  model::Sampler proposer = *s.sampler;  // sees the proposals; forgotten after the round
  // With a grammar, the proposals follow it too (a copy of the sequence's
  // state, advanced over them): each is drawn from what the sequence's own
  // step would draw from, so the judge keeps as many as it can. A grammar
  // that ends, or allows nothing, ends the proposals there.
  detail::GrammarStep grammar = *s.grammar;
  for (int i = 0; i < k; ++i) {
    check_row();
    try {
      draft_dists_.push_back(grammar.distribution(proposer, draft_logits_));
    } catch (const Error&) {
      break;  // nothing allowed here: the target's row says what comes
    }
    const int32_t d = draw_from(draft_dists_.back(), speculative_uniform(s.rng));
    proposer.accept(d);
    drafts_.push_back(d);
    if (grammar.take(d)) break;  // the grammar is finished: nothing else may follow
    if (i + 1 < k)
      options_.draft.eval(std::span<const int32_t>(&drafts_.back(), 1),
                          static_cast<int64_t>(context.size()) + i, draft_logits_);
  }
  draft_cached_ = std::move(context);
  if (!drafts_.empty()) draft_cached_.insert(draft_cached_.end(), drafts_.begin(), drafts_.end() - 1);
}

void BatchEngine::build_speculative(Slot& s, int k) {
  propose(s, k);  // throws to the driver, the slot untouched
  Group& g = groups_[0];
  g.batch.clear();
  g.rows.clear();
  g.members.assign(1, &s);
  g.prompt_tokens = 0;
  std::vector<int32_t> step{s.next};
  step.insert(step.end(), drafts_.begin(), drafts_.end());
  for (int32_t t : step) {
    g.batch.push_back({t, static_cast<int32_t>(s.cached.size()), s.index, true});
    s.cached.push_back(t);
    g.rows.push_back(&s);
  }
  speculating_ = &s;
}

void BatchEngine::take_speculative_rows(Slot& s, std::span<const float> logits) {
  const size_t vocab = static_cast<size_t>(model_.n_vocab);
  const size_t k = drafts_.size();
  const int64_t base = static_cast<int64_t>(s.cached.size() - (k + 1));  // where next was evaluated
  ++counters_.speculative_steps;
  for (size_t j = 0; j <= k; ++j) {
    const std::span<const float> row = logits.subspan(j * vocab, vocab);
    const int64_t position = base + static_cast<int64_t>(j) + 1;  // where this row's token would go
    std::optional<StopReason> stop;
    int32_t token = -1;
    try {
      if (j < k) {
        token = speculative_pick(s.grammar->distribution(*s.sampler, row), draft_dists_[j], drafts_[j],
                                 speculative_uniform(s.rng), speculative_uniform(s.rng));
        ++s.drafted, ++counters_.drafted;
        if (token == drafts_[j]) ++s.accepted, ++counters_.accepted;
      } else {
        token = s.grammar->sample(*s.sampler, row);  // after a run kept whole: the step's own draw
      }
      BatchSink* sink = s.sink;
      const TokenCallback emit = [sink, row](int32_t t) { return sink->on_token(t, row); };
      stop = detail::take_token(token, position, slot_ctx_, model_, s.job.options, *s.sampler, s.result, emit);
      if (!stop && s.grammar->take(token)) stop = StopReason::end_of_generation;  // nothing else may follow
    } catch (const std::exception& e) {
      s.cached.resize(static_cast<size_t>(position));
      end(s, StopReason::failed, e.what());
      return;
    }
    ++counters_.generated_tokens;
    if (stop || j == k || token != drafts_[j]) {
      // The cache keeps next and the kept drafts before this row's token.
      s.cached.resize(static_cast<size_t>(position));
      s.next = token;
      note_token_time(s);  // one round, however many tokens it kept
      if (stop) end(s, *stop);
      return;
    }
  }
}

}  // namespace weft
