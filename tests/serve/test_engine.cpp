// The serving engine on a tiny demo model: batched requests each equal to
// the same request run alone (Session::generate), queueing beyond the
// slots, cancellation, the queue bound, stop strings, prefix reuse and
// deadlines; over two stages, the slots' groups pipelined, each request
// still equal to its run alone (a dead stage: test_engine_recovery.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"
#include "rpc/local_workers.h"
#include "serve/engine.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/grammar.h"
#include "weft/runtime/session.h"
#include "weft/testing/async.h"

namespace {

using namespace weft::serve_test;


TEST_F(EngineTest, OneRequestEqualsGenerate) {
  auto s = session(256);
  Engine engine(*s, {.slots = 2});
  const auto p = prompt(0);
  Outcome o = drain(*engine.submit(greedy_job(p, 12)));
  EXPECT_EQ(o.tokens, alone(p, 12));
  EXPECT_EQ(o.finish.prompt_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(o.finish.completion_tokens, static_cast<int>(o.tokens.size()));
  EXPECT_TRUE(o.finish.finish_reason == "length" || o.finish.finish_reason == "stop") << o.finish.finish_reason;
  std::string decoded;
  for (int32_t t : o.tokens) decoded += s->tokenizer().decode_token(t);
  EXPECT_EQ(o.text, decoded);
}

// A grammar constrains batched sequences as it does one alone: each job's
// text is a sentence of it (checked by hand below, apart from the matcher)
// and equals Session::generate under the same grammar; the job ends where
// the grammar does ("stop").
TEST_F(EngineTest, GrammarConstrainsEachSequenceAsAlone) {
  auto s = session(256);
  auto grammar = weft::model::Grammar::parse(R"(root ::= "<" [a-e]{1,4} ("," [0-9])? ">")");
  auto trie = weft::model::TokenTrie::from_tokenizer(s->tokenizer());
  Engine engine(*s, {.slots = 2});
  std::vector<std::shared_ptr<Request>> rs;
  for (int i = 0; i < 3; ++i) {
    Job j = greedy_job(prompt(i), 40);
    j.grammar = grammar;
    j.ignore_eos = i == 2;  // the grammar's end ends it all the same
    rs.push_back(engine.submit(std::move(j)));
  }
  for (int i = 0; i < 3; ++i) {
    const Outcome o = drain(*rs[static_cast<size_t>(i)]);
    const std::string& t = o.text;
    bool ok = t.size() >= 3 && t.front() == '<' && t.back() == '>';
    size_t k = 1;
    while (ok && k < t.size() && t[k] >= 'a' && t[k] <= 'e') ++k;
    ok = ok && k >= 2 && k <= 5;
    if (ok && t[k] == ',') ok = k + 3 == t.size() && t[k + 1] >= '0' && t[k + 1] <= '9';
    else ok = ok && k + 1 == t.size();
    EXPECT_TRUE(ok) << "'" << t << "' is not a sentence of the grammar";
    EXPECT_EQ(o.finish.finish_reason, "stop");
    auto alone_s = session(128);
    weft::GenerateOptions opt{.max_tokens = 40, .stop_at_end_of_generation = i != 2};
    opt.grammar = grammar;
    opt.token_trie = trie;
    EXPECT_EQ(o.tokens, alone_s->generate(prompt(i), opt).tokens);
  }
}

TEST_F(EngineTest, PenaltiesSeeThePrompt) {
  // A prompt whose greedy next token is already in it: grown by its own
  // greedy tokens until one repeats (random weights repeat soon).
  std::vector<int32_t> p = prompt(0);
  int32_t next = -1;
  for (int i = 0; i < 32 && next < 0; ++i) {
    const int32_t g = alone(p, 1).at(0);
    if (std::find(p.begin(), p.end(), g) != p.end()) next = g;
    else p.push_back(g);
  }
  ASSERT_GE(next, 0) << "no greedy token repeated within 32 steps";
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  Job j = greedy_job(p, 1);
  j.sampler.presence_penalty = 100.f;  // far beyond any logit gap: no token of the prompt's tail can win
  const Outcome o = drain(*engine.submit(std::move(j)));
  ASSERT_EQ(o.tokens.size(), 1u);
  EXPECT_NE(o.tokens[0], next);
  EXPECT_EQ(std::find(p.begin(), p.end(), o.tokens[0]), p.end()) << "token " << o.tokens[0] << " is in the prompt";
}

TEST_F(EngineTest, ConcurrentRequestsEachEqualTheirOwnAlone) {
  // Six requests on three slots: three wait in the queue and join as
  // others finish; different lengths make them leave at different steps.
  auto s = session(3 * 64);
  Engine engine(*s, {.slots = 3, .max_queue = 8, .batch_tokens = 5});
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(engine.submit(greedy_job(prompt(i, 4 + i), 6 + 2 * i)));
  for (int i = 0; i < 6; ++i) {
    ASSERT_NE(requests[static_cast<size_t>(i)], nullptr);
    Outcome o = drain(*requests[static_cast<size_t>(i)]);
    EXPECT_EQ(o.tokens, alone(prompt(i, 4 + i), 6 + 2 * i)) << "request " << i;
  }
  const weft::serve::EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.requests_finished, 6u);
  EXPECT_EQ(m.slots_busy, 0);
  EXPECT_EQ(m.queue_length, 0u);
}

TEST_F(EngineTest, CancelledRequestLeavesAndFreesItsSlot) {
  // As long a job as the model's context allows: at 120 tokens the tiny
  // model sometimes finished (3 runs in 20 at AVX2) before the cancel.
  auto s = session(512);
  Engine engine(*s, {.slots = 1});
  Job long_job = greedy_job(prompt(1), 500);
  long_job.ignore_eos = true;
  auto r = engine.submit(long_job);
  ASSERT_TRUE(r->next(30s).has_value());  // it is generating
  r->cancel();
  Outcome o = drain(*r);
  EXPECT_EQ(o.finish.finish_reason, "cancelled");
  EXPECT_LT(o.finish.completion_tokens, 500);
  // The one slot serves the next request.
  Outcome next = drain(*engine.submit(greedy_job(prompt(2), 4)));
  EXPECT_EQ(next.tokens, alone(prompt(2), 4));
  EXPECT_EQ(engine.metrics().requests_cancelled, 1u);
}

TEST_F(EngineTest, FullQueueRefusesAndCountsIt) {
  auto s = session(512);  // a job long enough not to end before the next submissions (as above)
  Engine engine(*s, {.slots = 1, .max_queue = 1});
  Job j = greedy_job(prompt(3), 500);
  j.ignore_eos = true;
  auto running = engine.submit(j);
  ASSERT_TRUE(running->next(30s).has_value());  // admitted: the queue is empty again
  auto waiting = engine.submit(j);
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(engine.submit(j), nullptr);
  EXPECT_EQ(engine.metrics().requests_rejected, 1u);
  running->cancel();
  waiting->cancel();
  drain(*running);
  EXPECT_EQ(drain(*waiting).finish.finish_reason, "cancelled");
}

TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  Job j = greedy_job(prompt(4), 20);
  j.ignore_eos = true;
  const Outcome full = drain(*engine.submit(j));
  ASSERT_GE(full.text.size(), 6u);
  // A stop string from the middle of the greedy text.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  j.stop = {stop};
  const Outcome cut = drain(*engine.submit(j));
  EXPECT_EQ(cut.finish.finish_reason, "stop");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
}

TEST_F(EngineTest, PromptPrefixIsReusedFromTheSlot) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  std::vector<int32_t> p = prompt(5, 10);
  Job j = greedy_job(p, 5);
  j.ignore_eos = true;  // five tokens: the last one sampled, never fed
  const Outcome first = drain(*engine.submit(j));
  ASSERT_EQ(first.tokens.size(), 5u);
  EXPECT_EQ(first.finish.cached_tokens, 0);
  // The next turn: the first prompt, its answer, and more.
  std::vector<int32_t> longer = p;
  longer.insert(longer.end(), first.tokens.begin(), first.tokens.end());
  longer.push_back(400);
  const Outcome second = drain(*engine.submit(greedy_job(longer, 5)));
  EXPECT_EQ(second.finish.cached_tokens, static_cast<int>(p.size() + first.tokens.size()) - 1)
      << "every token fed before (the prompt and all but the last answer token) is reused";
  EXPECT_EQ(second.tokens, alone(longer, 5));
  // The same prompt again: all but its last token.
  const Outcome again = drain(*engine.submit(greedy_job(longer, 5)));
  EXPECT_EQ(again.finish.cached_tokens, static_cast<int>(longer.size()) - 1);
  EXPECT_EQ(again.tokens, second.tokens);
}

TEST_F(EngineTest, DeadlineEndsARequest) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  Job j = greedy_job(prompt(6), 120);
  j.ignore_eos = true;
  j.deadline = std::chrono::steady_clock::now();
  EXPECT_EQ(drain(*engine.submit(j)).finish.finish_reason, "timeout");
}

TEST_F(EngineTest, RefusesImpossibleJobs) {
  auto s = session(128);
  Engine engine(*s, {.slots = 2});
  auto expect_invalid = [&](Job j, const std::string& words) {
    try {
      engine.submit(std::move(j));
      ADD_FAILURE() << "accepted: " << words;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_invalid(greedy_job({}, 4), "empty");
  expect_invalid(greedy_job(std::vector<int32_t>(65, 5), 4), "do not fit a slot's context of 64");
  expect_invalid(greedy_job({1, 100000}, 4), "outside the vocabulary");
  Job bad = greedy_job(prompt(0), 4);
  bad.sampler.temperature = -1;
  expect_invalid(bad, "temperature");
  EXPECT_THROW(Engine(*s, {.slots = 3}), weft::Error);  // 3 does not divide 128
}

// Two stages (this CPU and a worker, a layer each): the four slots form two
// groups whose steps are in flight at once. Eight requests of different
// lengths join and leave; each equals its run alone on one CPU.
TEST_F(EngineTest, TwoStagesPipelineTheSlotGroups) {
  weft::testing::LocalWorkers workers(1);
  weft::SessionOptions o{.model = *path_, .devices = {"cpu:1", "rpc://" + workers.endpoint(0)}};
  o.split = "1,1";
  weft::Session s(o);
  s.load(4 * 64);
  ASSERT_EQ(s.batch_slots(), 2);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  EXPECT_EQ(engine.metrics().groups, 2);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(engine.submit(greedy_job(prompt(i, 3 + i), 5 + 3 * (i % 3))));
  for (int i = 0; i < 8; ++i) {
    ASSERT_NE(requests[static_cast<size_t>(i)], nullptr);
    Outcome out = drain(*requests[static_cast<size_t>(i)]);
    EXPECT_EQ(out.tokens, alone(prompt(i, 3 + i), 5 + 3 * (i % 3))) << "request " << i;
  }
  const weft::serve::EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.requests_finished, 8u);
  EXPECT_EQ(m.slots_busy, 0);
}

// The point of the groups: while one stage computes a group's prompt
// chunk, the other computes the other group's. Two workers over async
// devices whose every compute sleeps kDelayMs stand in for two machines
// (sleeps overlap on any CPU): while the prompts are fed (10 chunks of 4
// tokens each) their compute windows must overlap for several steps' time;
// one step at a time they would not overlap at all. Once both only decode,
// one step carries both (they read the weights once). An order check, not a
// speed check.
TEST_F(EngineTest, TwoStagesComputeAtOnce) {
  constexpr double kDelayMs = 40;
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_layer = 4;
  spec.tied = false;  // the output on the last worker: each step is one compute per worker
  const std::string untied = *path_ + ".untied.gguf";
  weft::model::write_demo_model(untied, spec);
  weft::testing::LocalWorkers slow(2, [&](int i) {
    weft::AsyncOptions ao;
    ao.delay_ms = kDelayMs;
    ao.name = "slow" + std::to_string(i);
    return weft::make_async_device(ao);
  });
  {
    weft::SessionOptions o{.model = untied, .devices = {"rpc://" + slow.endpoint(0), "rpc://" + slow.endpoint(1)}};
    o.split = "1,1";
    weft::Session s(o);
    s.load(2 * 64);
    Engine engine(s, {.slots = 2, .batch_tokens = 4});
    Job j0 = greedy_job(prompt(0, 39), 8), j1 = greedy_job(prompt(1, 39), 8);
    j0.ignore_eos = j1.ignore_eos = true;
    auto r0 = engine.submit(std::move(j0));
    auto r1 = engine.submit(std::move(j1));
    EXPECT_EQ(drain(*r0).finish.completion_tokens, 8);
    EXPECT_EQ(drain(*r1).finish.completion_tokens, 8);
    // 10 prompt steps per request, then decode steps carrying both (how
    // many of each depends on when the second request was admitted): fewer
    // than the 2 x (10 + 7) of two groups decoding apart.
    EXPECT_LT(engine.metrics().steps, 2u * (10u + 7u));
  }
  fs::remove(untied);
  const auto a = weft::async_device_compute_log(slow.device(0));
  const auto b = weft::async_device_compute_log(slow.device(1));
  ASSERT_GE(a.size(), 9u);
  ASSERT_GE(b.size(), 9u);
  const double overlap_ms = 1e3 * weft::compute_overlap_seconds(a, b);
  EXPECT_GE(overlap_ms, 4 * kDelayMs) << a.size() << " computes on one worker, " << b.size() << " on the other";
}

// Continuous batching on one stage: two requests in flight at once share
// steps (one batched graph carries a token of each), so the steps number
// about one request's, not the sum of both. The stage is a worker over an
// async device whose every compute sleeps kDelayMs, so the second request,
// submitted right after the first, is queued within the first step even on
// a loaded machine. Run one after another they would take 2 x 12 steps.
TEST_F(EngineTest, OneStageBatchesConcurrentRequestsIntoSharedSteps) {
  constexpr double kDelayMs = 20;
  constexpr int kTokens = 12;
  weft::testing::LocalWorkers slow(1, [](int) {
    weft::AsyncOptions ao;
    ao.delay_ms = kDelayMs;
    return weft::make_async_device(ao);
  });
  weft::SessionOptions o{.model = *path_, .devices = {"rpc://" + slow.endpoint(0)}};
  weft::Session s(o);
  s.load(2 * 64);
  Engine engine(s, {.slots = 2});
  EXPECT_EQ(engine.metrics().groups, 1);
  Job j0 = greedy_job(prompt(0), kTokens), j1 = greedy_job(prompt(1), kTokens);
  j0.ignore_eos = j1.ignore_eos = true;
  auto r0 = engine.submit(std::move(j0));
  auto r1 = engine.submit(std::move(j1));
  EXPECT_EQ(drain(*r0).tokens, alone(prompt(0), kTokens));
  EXPECT_EQ(drain(*r1).tokens, alone(prompt(1), kTokens));
  const weft::serve::EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.generated_tokens, 2u * kTokens);
  EXPECT_LE(m.steps, static_cast<uint64_t>(kTokens + 3)) << "the requests took turns instead of sharing steps";
}

// `weft run --parallel` (Session::generate_parallel) and `weft serve`
// (Engine) drive the one BatchEngine: the same prompts with the same
// sampling (sequence s seeded seed + s, as generate_parallel seeds it)
// give the same tokens, with a sampled temperature and penalties so that
// the samplers' state, not only the logits, must agree; over one device and
// over two stages (groups in flight).
TEST_F(EngineTest, RunParallelAndServeGiveTheSameTokens) {
  weft::testing::LocalWorkers workers(1);
  weft::model::SamplerOptions so;
  so.temperature = 0.9f;
  so.top_k = 40;
  so.repetition_penalty = 1.3f;
  so.seed = 77;
  for (bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "two stages" : "one device");
    weft::SessionOptions o{.model = *path_};
    if (staged) {
      o.devices = {"cpu:1", "rpc://" + workers.endpoint(0)};
      o.split = "1,1";
    }
    weft::Session s(o);
    s.load(4 * 32);
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 4; ++i) ps.push_back(prompt(i, 2 + 3 * i));
    weft::GenerateOptions go{.max_tokens = 12, .sampler = so, .stop_at_end_of_generation = false};
    const std::vector<weft::GenerateResult> parallel = s.generate_parallel(ps, go);
    Engine engine(s, {.slots = 4, .batch_tokens = 5});
    std::vector<std::shared_ptr<Request>> requests;
    for (int i = 0; i < 4; ++i) {
      Job j = greedy_job(ps[static_cast<size_t>(i)], 12);
      j.sampler = so;
      j.sampler.seed = so.seed + static_cast<uint64_t>(i);
      j.ignore_eos = true;
      requests.push_back(engine.submit(std::move(j)));
    }
    for (int i = 0; i < 4; ++i) {
      const Outcome out = drain(*requests[static_cast<size_t>(i)]);
      EXPECT_EQ(out.finish.finish_reason, "length");
      ASSERT_EQ(parallel[static_cast<size_t>(i)].tokens.size(), 12u);
      EXPECT_EQ(out.tokens, parallel[static_cast<size_t>(i)].tokens) << "sequence " << i;
    }
  }
}

TEST_F(EngineTest, ZeroMaxTokensFinishesAtOnce) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  const Outcome o = drain(*engine.submit(greedy_job(prompt(0), 0)));
  EXPECT_EQ(o.finish.finish_reason, "length");
  EXPECT_TRUE(o.tokens.empty());
}

}  // namespace

namespace {

// A request's n choices go in together or not at all, each its own
// sequence: with its own seed, each equals the same job submitted alone.
TEST_F(EngineTest, GroupsAreQueuedWholeOrRefused) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1, .max_queue = 1});
  Job j = greedy_job(prompt(5), 8);
  j.ignore_eos = true;
  j.sampler.temperature = 1.0f;
  EXPECT_TRUE(engine.submit_group({j, j, j}).empty());  // 1 slot + 1 place < 3
  EXPECT_EQ(engine.metrics().requests_rejected, 1u);
  std::vector<Job> two{j, j};
  two[0].sampler.seed = 11;
  two[1].sampler.seed = 12;
  auto group = engine.submit_group(two);
  ASSERT_EQ(group.size(), 2u);
  const Outcome a = drain(*group[0]), b = drain(*group[1]);
  EXPECT_EQ(a.tokens.size(), 8u);
  EXPECT_EQ(a.tokens, drain(*engine.submit(two[0])).tokens);
  EXPECT_EQ(b.tokens, drain(*engine.submit(two[1])).tokens);
  EXPECT_NE(a.tokens, b.tokens);  // two seeds at temperature 1 (8 random-weight tokens)
}

// Job::text_tokens: those tokens' vocabulary spelling reaches the text in
// place of their decoded bytes (for control tokens, "" otherwise).
TEST_F(EngineTest, TextTokensGiveTheirVocabularySpelling) {
  auto s = session(128);
  Engine engine(*s, {.slots = 1});
  Job j = greedy_job(prompt(6), 10);
  j.ignore_eos = true;
  const Outcome plain = drain(*engine.submit(j));
  const weft::model::Tokenizer& tok = s->tokenizer();
  std::string spelled, decoded;
  for (int32_t t : plain.tokens) {
    spelled += tok.token_text(t);
    decoded += tok.decode_token(t);
  }
  ASSERT_NE(spelled, decoded) << "the demo vocabulary spells these tokens as it decodes them";
  j.text_tokens = plain.tokens;
  EXPECT_EQ(drain(*engine.submit(j)).text, spelled);
  EXPECT_EQ(plain.text, decoded);
}

}  // namespace
