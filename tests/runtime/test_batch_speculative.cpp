// BatchEngine's speculative rounds (weft/runtime/batch_engine.h with a
// BatchDraft) over a fake target whose one-hot logits name the next token
// from the sequence and the position it was evaluated at, and a fake draft
// that proposes the same token except at chosen positions, so every
// expected token, step and count is known: a lone sequence's output equals
// plain decoding's whatever the draft proposes; its rounds judge exactly
// the proposals made; two busy sequences take plain steps; max_tokens, the
// slot's end, a stopping sink and cancellation end a round where plain
// decoding would; sampled tokens follow the target's distribution, not the
// draft's (the frequencies of 4000 draws against p); the draft's cache follows the sequence it serves; a
// grammar job speculates within its grammar and gives plain decoding's
// tokens; bad drafts are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/grammar.h"
#include "runtime/batch_test_sink.h"
#include "weft/runtime/batch_engine.h"

namespace {

using weft::BatchEnd;
using weft::BatchEngine;
using weft::BatchJob;
using weft::StopReason;
using weft::model::BatchToken;

using batch_test::expected;
using batch_test::job;
using batch_test::predicted;
using batch_test::Recorder;
using batch_test::run;
constexpr int64_t kSpecVocab = batch_test::kVocab;

std::vector<float> spec_one_hot(int32_t token) {
  std::vector<float> row(kSpecVocab, 0.0f);
  row[static_cast<size_t>(token)] = 1.0f;
  return row;
}

// The target: records every step; finish() answers each marked token's row.
struct SpecFakeTarget {
  std::vector<float> fixed_row;  // non-empty: every row's logits, whatever the token
  std::map<int, std::vector<BatchToken>> in_flight;
  std::vector<std::vector<BatchToken>> submitted;

  weft::BatchedEval eval() {
    weft::BatchedEval e;
    e.slots = 1;
    e.submit = [this](int slot, std::span<const BatchToken> batch, int64_t) {
      in_flight[slot].assign(batch.begin(), batch.end());
      submitted.push_back(in_flight[slot]);
    };
    e.finish = [this](int slot, std::vector<float>& logits) {
      logits.clear();
      for (const BatchToken& t : in_flight[slot])
        if (t.logits) {
          const std::vector<float> row = fixed_row.empty() ? spec_one_hot(predicted(t.seq, t.pos)) : fixed_row;
          logits.insert(logits.end(), row.begin(), row.end());
        }
      in_flight[slot].clear();
    };
    return e;
  }
};

// The draft: one sequence's cache as a token list (an eval at n_past
// overwrites from there, as a real cache would); it proposes the target's
// token for sequence `seq`, except after the positions in `wrong_at`.
struct SpecFakeDraft {
  int seq = 0;
  std::set<int32_t> wrong_at;
  std::vector<float> fixed_row;  // non-empty: every row's logits
  std::vector<int32_t> cache;
  int evals = 0;

  weft::BatchDraft draft(int draft_max, int64_t n_ctx = 64) {
    weft::BatchDraft d;
    d.eval = [this](std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits) {
      ++evals;
      ASSERT_LE(n_past, static_cast<int64_t>(cache.size())) << "the draft skipped positions";
      cache.resize(static_cast<size_t>(n_past));
      cache.insert(cache.end(), tokens.begin(), tokens.end());
      const int32_t pos = static_cast<int32_t>(cache.size() - 1);
      const int32_t right = predicted(seq, pos);
      logits = spec_one_hot(wrong_at.count(pos) ? (right + 1) % kSpecVocab : right);
      if (!fixed_row.empty()) logits = fixed_row;
    };
    d.model = {.n_vocab = kSpecVocab, .n_ctx = n_ctx};
    d.draft_max = draft_max;
    return d;
  }
};

BatchEngine spec_engine(SpecFakeTarget& t, SpecFakeDraft& d, int slots, int64_t n_ctx, int draft_max) {
  return BatchEngine(t.eval(), {.n_vocab = kSpecVocab, .n_ctx = n_ctx},
                     {.slots = slots, .draft = d.draft(draft_max, n_ctx / slots)});
}

TEST(BatchSpeculative, ALoneSequenceKeepsEveryRightProposalInOneStepPerRound) {
  SpecFakeTarget t;
  SpecFakeDraft d;
  BatchEngine e = spec_engine(t, d, 1, 64, 4);
  Recorder r;
  e.start(job({5, 6, 7}, 11), &r);
  run(e);
  EXPECT_EQ(r.tokens, expected(0, 3, 11));
  EXPECT_EQ(r.end.stop, StopReason::max_tokens);
  // The prompt's step gives token 1; rounds of 4 proposals give 5 each
  // (tokens 2-6, 7-11): 8 drafted, all kept.
  ASSERT_EQ(t.submitted.size(), 3u);
  EXPECT_EQ(e.counters().speculative_steps, 2u);
  EXPECT_EQ(e.counters().drafted, 8u);
  EXPECT_EQ(e.counters().accepted, 8u);
  EXPECT_EQ(r.end.drafted, 8);
  EXPECT_EQ(r.end.accepted, 8);
  // A round: the next token and the proposals at consecutive positions,
  // every row asked for.
  const std::vector<BatchToken>& round = t.submitted[1];
  ASSERT_EQ(round.size(), 5u);
  for (size_t i = 0; i < round.size(); ++i) {
    EXPECT_EQ(round[i].pos, static_cast<int32_t>(3 + i));
    EXPECT_EQ(round[i].token, r.tokens[i]);
    EXPECT_TRUE(round[i].logits);
  }
  EXPECT_EQ(t.submitted[2][0].pos, 8);
}

TEST(BatchSpeculative, RejectedProposalsChangeNothingButTheSteps) {
  SpecFakeTarget t;
  SpecFakeDraft d;
  d.wrong_at = {4, 9, 10, 15};  // the draft's token after these positions is wrong
  BatchEngine e = spec_engine(t, d, 1, 64, 4);
  Recorder r;
  e.start(job({5, 6, 7}, 20), &r);
  run(e);
  EXPECT_EQ(r.tokens, expected(0, 3, 20));
  EXPECT_LT(e.counters().accepted, e.counters().drafted);
  EXPECT_EQ(static_cast<uint64_t>(r.end.drafted), e.counters().drafted);
  // Each round starts where the tokens kept so far end: positions 2.. of
  // the sequence covered with no gap, each round's first token at the
  // position after the last kept one.
  int32_t next_pos = 3;
  for (size_t s = 1; s < t.submitted.size(); ++s) {
    EXPECT_EQ(t.submitted[s][0].pos, next_pos) << "step " << s;
    // Tokens kept in that round: the first disagreement's row, or all.
    int32_t kept = 1;
    while (kept < static_cast<int32_t>(t.submitted[s].size()) &&
           t.submitted[s][static_cast<size_t>(kept)].token == predicted(0, next_pos + kept - 1))
      ++kept;
    next_pos += kept;
  }
  // The draft's cache holds the prompt and the tokens kept, in order.
  const std::vector<int32_t> all = [&] {
    std::vector<int32_t> v{5, 6, 7};
    v.insert(v.end(), r.tokens.begin(), r.tokens.end());
    return v;
  }();
  const size_t n = std::min(d.cache.size(), all.size()) - 4;  // its last round's proposals may follow
  EXPECT_EQ(std::vector<int32_t>(d.cache.begin(), d.cache.begin() + static_cast<long>(n)),
            std::vector<int32_t>(all.begin(), all.begin() + static_cast<long>(n)));
}

TEST(BatchSpeculative, MaxTokensAndTheSlotsEndStopARoundWherePlainDecodingStops) {
  // A round drafts one fewer than the tokens left (the target adds one):
  // after the prompt's token, 1 left: a plain step; 4 left: 3 drafted; 5
  // left: 4; 6 left: 4, then a plain step for the last.
  const std::map<int, uint64_t> drafted = {{1, 0}, {2, 0}, {5, 3}, {6, 4}, {7, 4}};
  for (const auto& [max_tokens, want_drafted] : drafted) {
    SpecFakeTarget t;
    SpecFakeDraft d;
    BatchEngine e = spec_engine(t, d, 1, 64, 4);
    Recorder r;
    e.start(job({1, 2}, max_tokens), &r);
    run(e);
    EXPECT_EQ(r.tokens, expected(0, 2, max_tokens)) << max_tokens;
    EXPECT_EQ(r.end.stop, StopReason::max_tokens);
    EXPECT_EQ(e.counters().drafted, want_drafted) << max_tokens;
    EXPECT_EQ(e.counters().accepted, want_drafted) << max_tokens;
  }
  SpecFakeTarget t;
  SpecFakeDraft d;
  BatchEngine e = spec_engine(t, d, 2, 2 * 12, 8);
  Recorder r;
  e.start(job({1, 2, 3}, 100), &r);
  run(e);
  EXPECT_EQ(r.end.stop, StopReason::context_full);
  EXPECT_EQ(r.tokens, expected(0, 3, 12 - 3 + 1));  // as plain decoding: the last token has no position
  for (const auto& step : t.submitted)
    for (const BatchToken& tok : step) EXPECT_LT(tok.pos, 12);
}

TEST(BatchSpeculative, ASinkThatStopsOrCancelsEndsTheJobAtItsToken) {
  SpecFakeTarget t;
  SpecFakeDraft d;
  BatchEngine e = spec_engine(t, d, 1, 64, 6);
  Recorder stopped;
  stopped.stop_after = 4;  // mid-round: tokens 2-7 come from one round
  e.start(job({9, 8, 7}, 30), &stopped);
  run(e);
  EXPECT_EQ(stopped.end.stop, StopReason::callback);
  EXPECT_EQ(stopped.tokens, expected(0, 3, 4));
  EXPECT_EQ(stopped.end.generated, 4);
  // The slot's cache keeps what was evaluated before the stop: the same
  // prompt again reuses it and decodes the same tokens.
  Recorder again;
  e.start(job({9, 8, 7}, 9), &again);
  run(e);
  EXPECT_EQ(again.tokens, expected(0, 3, 9));
  Recorder cancelled;
  cancelled.cancel_after = 3;
  e.start(job({4, 4}, 30), &cancelled);
  run(e);
  EXPECT_EQ(cancelled.end.stop, StopReason::cancelled);
  ASSERT_GE(cancelled.tokens.size(), 3u);
  EXPECT_EQ(cancelled.tokens, expected(0, 2, static_cast<int>(cancelled.tokens.size())));
}

TEST(BatchSpeculative, TwoBusySequencesTakePlainStepsAndTheLastOneAloneSpeculates) {
  SpecFakeTarget t;
  SpecFakeDraft d;
  d.seq = 1;  // right for slot 1's sequence only
  BatchEngine e = spec_engine(t, d, 2, 2 * 64, 4);
  Recorder a, b;
  e.start(job({1, 2, 3}, 4), &a);   // slot 0
  e.start(job({4, 5}, 20), &b);     // slot 1, outlives a
  run(e);
  EXPECT_EQ(a.tokens, expected(0, 3, 4));
  EXPECT_EQ(b.tokens, expected(1, 2, 20));
  EXPECT_EQ(a.end.drafted, 0);
  EXPECT_GT(b.end.accepted, 0);
  EXPECT_EQ(b.end.accepted, b.end.drafted);
  // After the prompts' step, while both were busy, no step carried more
  // than one token of a sequence.
  bool both_seen = false;
  for (size_t i = 1; i < t.submitted.size(); ++i) {
    std::map<int, int> per_seq;
    for (const BatchToken& tok : t.submitted[i]) ++per_seq[tok.seq];
    if (per_seq.size() == 2) {
      both_seen = true;
      EXPECT_EQ(per_seq[0], 1);
      EXPECT_EQ(per_seq[1], 1);
    }
  }
  EXPECT_TRUE(both_seen);
}

// Token i's text: a letter (i mod 26) and i's digits ("A0", "B1", ...).
std::shared_ptr<const weft::model::TokenTrie> spec_letters_trie() {
  std::vector<std::string> vocab;
  for (int i = 0; i < kSpecVocab; ++i)
    vocab.push_back(std::string(1, static_cast<char>('A' + (i % 26))) + std::to_string(i));
  return std::make_shared<const weft::model::TokenTrie>(vocab, std::vector<int32_t>{});
}

// The job's tokens with no draft: what a speculative run must give.
std::vector<int32_t> plain_tokens(const BatchJob& j) {
  SpecFakeTarget t;
  BatchEngine e(t.eval(), {.n_vocab = kSpecVocab, .n_ctx = 64}, {.slots = 1});
  Recorder r;
  e.start(j, &r);
  run(e);
  return r.tokens;
}

// A grammar job speculates too: the draft's proposals follow the grammar
// (a copy of the sequence's state) and each is judged against what the
// sequence's own step draws from (GrammarStep::distribution), so the tokens
// are plain decoding's under the same grammar. Grammars that allow every
// token, that force other tokens than the target's (letters A-M only: the
// target's one-hot picks N-Z at some positions), with a draft wrong at some
// positions, and one that ends after three tokens.
TEST(BatchSpeculative, AGrammarJobSpeculatesWithinItsGrammarAndGivesThePlainTokens) {
  struct Case {
    const char* grammar;
    std::set<int32_t> wrong_at;
  };
  const Case cases[] = {{R"(root ::= [A-Za-z0-9]*)", {}},
                        {R"(root ::= ([A-M] [0-9]+)*)", {}},
                        {R"(root ::= ([A-M] [0-9]+)*)", {4, 9}},
                        {R"(root ::= [A-Z] [0-9]+ [A-Z] [0-9]+ [A-Z] [0-9]+)", {}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.grammar) + ", " + std::to_string(c.wrong_at.size()) + " wrong proposals");
    BatchJob j = job({1, 2}, 12);
    j.options.grammar = weft::model::Grammar::parse(c.grammar);
    j.options.token_trie = spec_letters_trie();
    const std::vector<int32_t> want = plain_tokens(j);
    SpecFakeTarget t;
    SpecFakeDraft d;
    d.wrong_at = c.wrong_at;
    BatchEngine e = spec_engine(t, d, 1, 64, 4);
    Recorder r;
    e.start(std::move(j), &r);
    run(e);
    EXPECT_EQ(r.tokens, want);
    EXPECT_GT(e.counters().speculative_steps, 0u);
    EXPECT_GT(e.counters().drafted, 0u);
    if (c.wrong_at.empty()) {
      EXPECT_EQ(e.counters().accepted, e.counters().drafted);  // the draft's row is the target's: every one kept
    } else {
      EXPECT_LT(e.counters().accepted, e.counters().drafted);
    }
  }
  // The forcing grammar did change the text: the test is not vacuous.
  BatchJob free = job({1, 2}, 12), forced = job({1, 2}, 12);
  forced.options.grammar = weft::model::Grammar::parse(R"(root ::= ([A-M] [0-9]+)*)");
  forced.options.token_trie = spec_letters_trie();
  EXPECT_NE(plain_tokens(free), plain_tokens(forced));
  BatchJob three = job({1, 2}, 12);
  three.options.grammar = weft::model::Grammar::parse(R"(root ::= [A-Z] [0-9]+ [A-Z] [0-9]+ [A-Z] [0-9]+)");
  three.options.token_trie = spec_letters_trie();
  EXPECT_EQ(plain_tokens(three).size(), 3u);
}

// Logits whose softmax over tokens 0..3 is p (the rest never drawn).
std::vector<float> spec_row_of(const std::vector<double>& p) {
  std::vector<float> row(kSpecVocab, -1e9f);
  for (size_t i = 0; i < p.size(); ++i) row[i] = static_cast<float>(std::log(p[i]));
  return row;
}

TEST(BatchSpeculative, SampledTokensHaveTheTargetsDistributionWhateverTheDraftProposes) {
  // The draft's q is the target's p reversed: kept as drafted, its tokens
  // would come out with q. The second token of each job is judged from one
  // proposal (max_tokens 3: a round of one).
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4}, q = {0.4, 0.3, 0.2, 0.1};
  SpecFakeTarget t;
  SpecFakeDraft d;
  t.fixed_row = spec_row_of(p);
  d.fixed_row = spec_row_of(q);
  BatchEngine e = spec_engine(t, d, 1, 64, 4);
  constexpr int kJobs = 4000;
  std::vector<int> seen(4, 0);
  for (int i = 0; i < kJobs; ++i) {
    BatchJob j = job({1}, 3);
    j.options.sampler = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                         .seed = static_cast<uint64_t>(i + 1)};
    Recorder r;
    e.start(std::move(j), &r);
    run(e);
    ASSERT_EQ(r.tokens.size(), 3u);
    ASSERT_LT(r.tokens[1], 4);
    ++seen[static_cast<size_t>(r.tokens[1])];
  }
  EXPECT_EQ(e.counters().drafted, static_cast<uint64_t>(kJobs));
  // Kept with probability sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p, q) = 0.6.
  EXPECT_NEAR(static_cast<double>(e.counters().accepted) / kJobs, 0.6, 0.03);
  for (size_t x = 0; x < 4; ++x)  // 4 sigma of a binomial proportion is at most 0.032
    EXPECT_NEAR(static_cast<double>(seen[x]) / kJobs, p[x], 0.032) << "token " << x;
}

TEST(BatchSpeculative, ADraftThatCannotServeIsRefused) {
  SpecFakeTarget t;
  SpecFakeDraft d;
  auto refused = [&](weft::BatchDraft draft, int64_t n_ctx, const std::string& words) {
    try {
      BatchEngine e(t.eval(), {.n_vocab = kSpecVocab, .n_ctx = n_ctx}, {.slots = 2, .draft = std::move(draft)});
      ADD_FAILURE() << "accepted; wanted: " << words;
    } catch (const weft::Error& err) {
      EXPECT_EQ(err.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  refused(d.draft(0), 64, "draft_max 0");
  refused(d.draft(512), 64, "draft_max 512");
  weft::BatchDraft other = d.draft(4);
  other.model.n_vocab = kSpecVocab + 1;
  refused(other, 64, "65 logits per token, the target 64");
  refused(d.draft(4, 16), 64, "context of 16 positions is smaller than a slot's 32");
}

}  // namespace
