// The generation loop (include/weft/runtime/generate.h) over a fake model:
// the next token is always (last token + 1) mod vocab, so every sequence and
// every stop is known in advance.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "weft/core/error.h"
#include "weft/runtime/generate.h"

namespace {

constexpr int64_t kGenerateVocab = 10;

struct FakeGenerationModel {
  struct Call {
    std::vector<int32_t> tokens;
    int64_t n_past;
  };
  std::vector<Call> calls;
  size_t extra_logits = 0;  // a broken model returns this many more
  void operator()(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits) {
    calls.push_back({{tokens.begin(), tokens.end()}, n_past});
    logits.assign(kGenerateVocab + extra_logits, 0.0f);
    logits[static_cast<size_t>((tokens.back() + 1) % kGenerateVocab)] = 5.0f;
  }
};

weft::GenerationModel fake(int64_t n_ctx, int32_t eog = -1) {
  return {.n_vocab = kGenerateVocab, .n_ctx = n_ctx, .is_end_of_generation = [eog](int32_t t) { return t == eog; }};
}

TEST(Generate, GreedyTokensAndPositions) {
  FakeGenerationModel m;
  const std::vector<int32_t> prompt{3, 1, 4};
  std::vector<int32_t> seen;
  const weft::GenerateResult r = weft::run_generation(std::ref(m), fake(64), prompt, {.max_tokens = 4},
                                                      [&](int32_t t) {
                                                        seen.push_back(t);
                                                        return true;
                                                      });
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(seen, r.tokens);
  EXPECT_EQ(r.stop, weft::StopReason::max_tokens);
  // The prompt at 0, then each emitted token but the last at the next position.
  ASSERT_EQ(m.calls.size(), 4u);
  EXPECT_EQ(m.calls[0].tokens, prompt);
  EXPECT_EQ(m.calls[0].n_past, 0);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(m.calls[i].tokens, std::vector<int32_t>{r.tokens[i - 1]});
    EXPECT_EQ(m.calls[i].n_past, static_cast<int64_t>(prompt.size() + i - 1));
  }
  EXPECT_GE(r.total_seconds, r.prompt_seconds);
}

TEST(Generate, StopConditions) {
  const std::vector<int32_t> prompt{0};
  {
    FakeGenerationModel m;  // 1, 2, then 3 is the end of generation: not emitted
    const auto r = weft::run_generation(std::ref(m), fake(64, 3), prompt, {.max_tokens = 9});
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(r.stop, weft::StopReason::end_of_generation);
  }
  {
    FakeGenerationModel m;  // ... unless told to ignore it
    weft::GenerateOptions o{.max_tokens = 4, .stop_at_end_of_generation = false};
    const auto r = weft::run_generation(std::ref(m), fake(64, 3), prompt, o);
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  }
  {
    FakeGenerationModel m;
    weft::GenerateOptions o{.max_tokens = 9, .stop_tokens = {5, 7}};
    const auto r = weft::run_generation(std::ref(m), fake(64), prompt, o);
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
    EXPECT_EQ(r.stop, weft::StopReason::stop_token);
  }
  {
    FakeGenerationModel m;  // the callback's false comes after the token is emitted
    const auto r = weft::run_generation(std::ref(m), fake(64), prompt, {.max_tokens = 9},
                                        [](int32_t t) { return t != 2; });
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(r.stop, weft::StopReason::callback);
  }
  {
    FakeGenerationModel m;  // 3 positions: the prompt, then tokens at 1 and 2; the third emitted has no room
    const auto r = weft::run_generation(std::ref(m), fake(3), prompt, {.max_tokens = 9});
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(r.stop, weft::StopReason::context_full);
    for (const auto& c : m.calls) EXPECT_LT(c.n_past + static_cast<int64_t>(c.tokens.size()), 4);
  }
  {
    FakeGenerationModel m;  // nothing to generate: the prompt is evaluated (it fills the cache), nothing sampled
    const auto r = weft::run_generation(std::ref(m), fake(64), prompt, {.max_tokens = 0});
    EXPECT_TRUE(r.tokens.empty());
    ASSERT_EQ(m.calls.size(), 1u);
    EXPECT_EQ(m.calls[0].tokens, prompt);
  }
}

TEST(Generate, SamplingIsSeeded) {
  weft::GenerateOptions o{.max_tokens = 6};
  o.sampler.temperature = 1.5f;
  o.sampler.top_k = 0;
  o.sampler.top_p = 1.0f;
  o.sampler.min_p = 0.0f;
  o.sampler.seed = 7;
  FakeGenerationModel a, b;
  const auto ra = weft::run_generation(std::ref(a), fake(64), std::vector<int32_t>{0}, o);
  const auto rb = weft::run_generation(std::ref(b), fake(64), std::vector<int32_t>{0}, o);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_EQ(ra.tokens.size(), 6u);
}

TEST(Generate, ContinuesAfterStartPositions) {
  FakeGenerationModel m;
  weft::GenerateOptions o{.max_tokens = 3};
  o.start = 7;  // positions 0..6 already cached (a conversation's earlier turns)
  const auto r = weft::run_generation(std::ref(m), fake(12), std::vector<int32_t>{2, 3}, o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 5, 6}));
  ASSERT_EQ(m.calls.size(), 3u);
  EXPECT_EQ(m.calls[0].n_past, 7);  // the prompt only, after the cached positions
  EXPECT_EQ(m.calls[1].n_past, 9);
  EXPECT_EQ(m.calls[2].n_past, 10);
  // 7 + 2 = 9 positions, then 3 more reach 12: the context ends the third.
  FakeGenerationModel full;
  o.max_tokens = 10;
  const auto f = weft::run_generation(std::ref(full), fake(11), std::vector<int32_t>{2, 3}, o);
  EXPECT_EQ(f.stop, weft::StopReason::context_full);
  EXPECT_EQ(f.tokens.size(), 3u);
  o.start = 10;  // a prompt of 2 does not fit after 10 of 11
  EXPECT_THROW(weft::run_generation(std::ref(m), fake(11), std::vector<int32_t>{2, 3}, o), weft::Error);
  o.start = -1;
  EXPECT_THROW(weft::run_generation(std::ref(m), fake(11), std::vector<int32_t>{2, 3}, o), weft::Error);
}

TEST(Generate, PenaltiesSeeThePromptTail) {
  // The fake model's greedy next token after 4 is 5 (logit 5, the rest 0).
  weft::GenerateOptions o{.max_tokens = 1};
  o.sampler.presence_penalty = 10.f;
  FakeGenerationModel a;
  EXPECT_EQ(weft::run_generation(std::ref(a), fake(64), std::vector<int32_t>{3, 4}, o).tokens[0], 5);
  // 5 in the prompt: 5 - 10 < 0, and 4 too: token 0 (the lowest id at 0) wins.
  FakeGenerationModel b;
  EXPECT_EQ(weft::run_generation(std::ref(b), fake(64), std::vector<int32_t>{5, 4}, o).tokens[0], 0);
  // A window of one token holds only 4: 5 is not penalized.
  o.sampler.repetition_window = 1;
  FakeGenerationModel c;
  EXPECT_EQ(weft::run_generation(std::ref(c), fake(64), std::vector<int32_t>{5, 4}, o).tokens[0], 5);
}

TEST(Generate, BadInputIsRefused) {
  FakeGenerationModel m;
  const std::vector<int32_t> prompt{1, 2, 3};
  EXPECT_THROW(weft::run_generation(std::ref(m), fake(64), std::vector<int32_t>{}, {}), weft::Error);
  EXPECT_THROW(weft::run_generation(std::ref(m), fake(2), prompt, {}), weft::Error);  // prompt past n_ctx
  EXPECT_THROW(weft::run_generation(std::ref(m), fake(64), prompt, {.max_tokens = -1}), weft::Error);
  FakeGenerationModel broken;
  broken.extra_logits = 1;
  try {
    weft::run_generation(std::ref(broken), fake(64), prompt, {});
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("eval returned 11 logits for the last token of a 10-token vocabulary"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
