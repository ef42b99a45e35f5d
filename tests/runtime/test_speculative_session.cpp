// Speculative decoding over Sessions of tiny demo models: greedy output
// identical to plain decoding with a different draft (few tokens kept) and
// with the target as its own draft (every token kept, fewer target steps),
// locally and with the target split over two loopback workers; the target's
// cache after rejected drafts continues as a fresh evaluation of the same
// history; a draft of another vocabulary (size, or one token's string)
// refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/grammar.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/session.h"
#include "weft/runtime/speculative.h"

namespace {

namespace fs = std::filesystem;

class SpeculativeSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string stem = (fs::temp_directory_path() / ("weft_spec_" + std::to_string(::getpid()))).string();
    target_ = new std::string(stem + "_target.gguf");
    draft_ = new std::string(stem + "_draft.gguf");
    other_vocab_ = new std::string(stem + "_other.gguf");
    weft::model::DemoModelSpec t = weft::model::tiny_demo_spec();
    t.n_layer = 3;
    weft::model::write_demo_model(*target_, t);
    weft::model::DemoModelSpec d = weft::model::tiny_demo_spec();  // same vocabulary, narrower, other weights
    d.n_layer = 1;
    d.n_embd = 32;
    d.n_head = 2;
    d.n_head_kv = 1;
    d.n_ff = 64;
    d.seed = 7;
    weft::model::write_demo_model(*draft_, d);
    d.n_vocab = 520;
    weft::model::write_demo_model(*other_vocab_, d);
  }
  static void TearDownTestSuite() {
    for (std::string* p : {target_, draft_, other_vocab_}) {
      fs::remove(*p);
      delete p;
    }
  }

  static std::unique_ptr<weft::Session> loaded(const std::string& path, std::vector<std::string> devices = {"cpu:1"},
                                               std::string split = "") {
    auto s = std::make_unique<weft::Session>(
        weft::SessionOptions{.model = path, .devices = std::move(devices), .split = std::move(split), .probe = false});
    s->load(kCtx);
    return s;
  }
  static std::vector<int32_t> prompt(const weft::Session& s) {
    return s.tokenizer().encode(weft::model::kDemoPrompt, true);
  }
  static weft::GenerateOptions greedy_options() { return {.max_tokens = kTokens, .stop_at_end_of_generation = false}; }
  // Plain greedy decoding of the target: the reference.
  static std::vector<int32_t> plain(const std::string& path) {
    std::unique_ptr<weft::Session> s = loaded(path);
    return s->generate(prompt(*s), greedy_options()).tokens;
  }

  static constexpr int64_t kCtx = 96;
  static constexpr int kTokens = 40;
  static std::string* target_;
  static std::string* draft_;
  static std::string* other_vocab_;
};
std::string* SpeculativeSessionTest::target_ = nullptr;
std::string* SpeculativeSessionTest::draft_ = nullptr;
std::string* SpeculativeSessionTest::other_vocab_ = nullptr;

TEST_F(SpeculativeSessionTest, GreedyWithAnotherDraftIsPlainDecoding) {
  const std::vector<int32_t> want = plain(*target_);
  ASSERT_EQ(want.size(), static_cast<size_t>(kTokens));
  for (int draft_max : {1, 3, 8}) {
    std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*draft_);
    std::vector<int32_t> streamed;
    const weft::SpeculativeResult r =
        weft::generate_speculative(*target, *draft, prompt(*target), greedy_options(), {.draft_max = draft_max},
                                   [&](int32_t t) { streamed.push_back(t); return true; });
    EXPECT_EQ(r.generation.tokens, want) << "draft_max " << draft_max;
    EXPECT_EQ(streamed, want);
    EXPECT_EQ(r.generation.stop, weft::StopReason::max_tokens);
    EXPECT_GT(r.counts.drafted, 0);
    EXPECT_LT(r.counts.accepted, r.counts.drafted) << "a different random model should disagree somewhere";
  }
}

// A grammar with a draft (`weft run --model-draft --grammar-file`): the
// proposals follow it, each is judged against what a plain step draws
// from, and the tokens are plain decoding's under the same grammar, with
// another draft and with the target as its own (every proposal kept).
TEST_F(SpeculativeSessionTest, GreedyWithinAGrammarIsPlainDecodingUnderIt) {
  std::unique_ptr<weft::Session> plain_target = loaded(*target_);
  weft::GenerateOptions o = greedy_options();
  o.grammar = weft::model::Grammar::parse(R"(root ::= "once upon a time" [a-z ]+)");  // state: the words first
  o.token_trie = weft::model::TokenTrie::from_tokenizer(plain_target->tokenizer());
  const std::vector<int32_t> want = plain_target->generate(prompt(*plain_target), o).tokens;
  ASSERT_FALSE(want.empty());
  EXPECT_NE(want, plain(*target_));  // the grammar changed the text
  for (const std::string* draft_path : {draft_, target_}) {
    std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*draft_path);
    const weft::SpeculativeResult r = weft::generate_speculative(*target, *draft, prompt(*target), o, {.draft_max = 4});
    EXPECT_EQ(r.generation.tokens, want) << (draft_path == target_ ? "the target as draft" : "another draft");
    EXPECT_GT(r.counts.drafted, 0);
    if (draft_path == target_) {
      EXPECT_EQ(r.counts.accepted, r.counts.drafted);
    }
  }
}

TEST_F(SpeculativeSessionTest, TargetAsItsOwnDraftKeepsEveryTokenInFewerSteps) {
  const std::vector<int32_t> want = plain(*target_);
  std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*target_);
  const int draft_max = 4;
  const weft::SpeculativeResult r =
      weft::generate_speculative(*target, *draft, prompt(*target), greedy_options(), {.draft_max = draft_max});
  EXPECT_EQ(r.generation.tokens, want);
  EXPECT_EQ(r.counts.accepted, r.counts.drafted);
  // The first token comes from the prompt's step; then each step emits
  // draft_max + 1 tokens (fewer in the last): ceil(39 / 5) = 8 steps, not 39.
  EXPECT_EQ(r.counts.target_steps, (kTokens - 1 + draft_max) / (draft_max + 1));
  EXPECT_EQ(r.counts.drafted, kTokens - 1 - r.counts.target_steps);
}

TEST_F(SpeculativeSessionTest, SampledWithTheTargetAsDraftKeepsEveryToken) {
  std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*target_);
  weft::GenerateOptions o = greedy_options();
  o.sampler = {.temperature = 0.1f, .top_k = 0, .top_p = 1.f, .min_p = 0.f, .repetition_penalty = 1.5f,
               .presence_penalty = 2.f, .seed = 3};
  {  // peaked enough that a draft with a different penalty window would lose some tokens
    weft::model::Sampler probe(o.sampler);
    const std::vector<float> row = target->eval(prompt(*target), 0, weft::model::LogitRows::last);
    double top = 0;
    for (const weft::model::Sampler::Choice& c : probe.distribution(row)) top = std::max(top, c.probability);
    EXPECT_GT(top, 0.05);
    EXPECT_LT(top, 0.99);
  }
  const weft::SpeculativeResult r = weft::generate_speculative(*target, *draft, prompt(*target), o, {.draft_max = 5});
  EXPECT_EQ(r.generation.tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_GT(r.counts.drafted, 0);
  EXPECT_EQ(r.counts.accepted, r.counts.drafted);  // p == q: min(1, p/q) is 1
}

// After rounds with rejected drafts the target's cache holds stale rows
// past the accepted length; evaluating the next token there must give what
// a fresh session gives for the same history.
TEST_F(SpeculativeSessionTest, CacheAfterRejectionsContinuesAsAFreshRun) {
  std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*draft_);
  const std::vector<int32_t> p = prompt(*target);
  const weft::SpeculativeResult r = weft::generate_speculative(*target, *draft, p, greedy_options(), {.draft_max = 8});
  ASSERT_LT(r.counts.accepted, r.counts.drafted);
  std::vector<int32_t> history = p;
  history.insert(history.end(), r.generation.tokens.begin(), r.generation.tokens.end() - 1);
  const int32_t last = r.generation.tokens.back();  // emitted, not yet evaluated
  const std::vector<float> continued =
      target->eval(std::span<const int32_t>(&last, 1), static_cast<int64_t>(history.size()), weft::model::LogitRows::last);
  std::unique_ptr<weft::Session> fresh = loaded(*target_);
  history.push_back(last);
  const std::vector<float> want = fresh->eval(history, 0, weft::model::LogitRows::last);
  ASSERT_EQ(continued.size(), want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(continued[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_LT(worst, 1e-3 * scale) << "worst " << worst << " of " << scale;
}

TEST_F(SpeculativeSessionTest, GreedyOverTwoWorkersIsPlainDecoding) {
  const std::vector<int32_t> want = plain(*target_);
  std::vector<std::unique_ptr<weft::Device>> cpus;
  std::vector<std::unique_ptr<weft::rpc::Worker>> workers;
  std::vector<std::string> devices;
  for (int i = 0; i < 2; ++i) {
    cpus.push_back(weft::make_cpu_device(1));
    weft::rpc::WorkerOptions o;
    o.log = false;
    workers.push_back(std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{cpus.back().get()}, o));
    workers.back()->start();
    devices.push_back("rpc://127.0.0.1:" + std::to_string(workers.back()->port()));
  }
  {
    std::unique_ptr<weft::Session> target = loaded(*target_, devices, "1,2"), draft = loaded(*draft_);
    const weft::SpeculativeResult r =
        weft::generate_speculative(*target, *draft, prompt(*target), greedy_options(), {.draft_max = 4});
    EXPECT_EQ(r.generation.tokens, want);
    EXPECT_LT(r.counts.target_steps, kTokens - 1);
  }
  workers.clear();
}

TEST_F(SpeculativeSessionTest, DraftOfAnotherVocabularyIsRefused) {
  std::unique_ptr<weft::Session> target = loaded(*target_), draft = loaded(*other_vocab_);
  try {
    weft::generate_speculative(*target, *draft, prompt(*target), greedy_options(), {});
    FAIL() << "a draft of 520 tokens was taken for a target of 600";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("520 tokens, the target's 600"), std::string::npos) << e.what();
  }
}

// The same size, one string changed: the target's file with token 0's
// "<unk>" spelled "<UNK>" (same length, so every offset stays).
TEST_F(SpeculativeSessionTest, DraftWithAnotherTokenStringIsRefused) {
  std::string bytes;
  {
    std::ifstream in(*target_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = bytes.find("<unk>");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "<UNK>");
  const std::string renamed = *target_ + ".renamed.gguf";
  {
    std::ofstream out(renamed, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  weft::Session target({.model = *target_, .devices = {"cpu:1"}, .probe = false});
  weft::Session draft({.model = renamed, .devices = {"cpu:1"}, .probe = false});
  fs::remove(renamed);
  try {
    weft::check_same_vocabulary(target.tokenizer(), draft.tokenizer());
    FAIL() << "a draft spelling token 0 differently was taken";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("token 0 is '<UNK>' in the draft model's vocabulary, '<unk>' in the target's"),
              std::string::npos)
        << e.what();
  }
  weft::check_same_vocabulary(target.tokenizer(), target.tokenizer());  // and the same file passes
}

}  // namespace
