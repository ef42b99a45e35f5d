// The serving engine when a stage dies (docs/recovery.md): without
// recover, every busy request ends with an error naming it and the engine
// goes on taking requests; with it, the model is placed again and the
// requests go on with their tokens unchanged; and a worker back at its
// port is taken back while the engine is idle, each on its own.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"
#include "rpc/local_workers.h"
#include "serve/engine.h"
#include "weft/runtime/session.h"

namespace {

using namespace weft::serve_test;

// A worker at port (0: any free one).
std::unique_ptr<weft::testing::LocalWorkers> worker_at(uint16_t port) {
  return std::make_unique<weft::testing::LocalWorkers>(1, std::function<std::unique_ptr<weft::Device>(int)>{}, port);
}

// A demo model of three layers beside the suite's (two), one per stage
// over this host and two workers; removed with this object.
struct ThreeLayerModel {
  explicit ThreeLayerModel(const std::string& beside) : path(beside + ".3layers.gguf") {
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 3;
    weft::model::write_demo_model(path, spec);
  }
  ~ThreeLayerModel() { fs::remove(path); }
  ThreeLayerModel(const ThreeLayerModel&) = delete;
  ThreeLayerModel& operator=(const ThreeLayerModel&) = delete;
  // Greedy tokens of p run alone on this CPU.
  std::vector<int32_t> alone(const std::vector<int32_t>& p, int max_tokens) const {
    weft::Session one(weft::SessionOptions{.model = path});
    one.load(128);
    return one.generate(p, {.max_tokens = max_tokens, .stop_at_end_of_generation = true}).tokens;
  }
  std::string path;
};

// Whether the engine has taken back n workers within 30 s (the watch's
// probe, then the idle engine's poll).
bool rejoins_reach(const Engine& engine, uint64_t n) {
  for (int waited = 0; waited < 300 && engine.metrics().rejoins < n; ++waited) std::this_thread::sleep_for(100ms);
  return engine.metrics().rejoins == n;
}

// A stage that dies while steps are in flight ends every busy request with
// an error naming it; the engine then takes requests again (which fail the
// same way) and shuts down without a hang.
TEST_F(EngineTest, ADeadStageEndsTheRequestsWithAnError) {
  weft::testing::LocalWorkers workers(1);
  weft::SessionOptions o{.model = *path_, .devices = {"cpu:1", "rpc://" + workers.endpoint(0)}};
  o.split = "1,1";
  weft::Session s(o);
  s.load(4 * 128);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 4; ++i) {
    Job j = greedy_job(prompt(i), 120);
    j.ignore_eos = true;
    requests.push_back(engine.submit(std::move(j)));
  }
  // Once every request has a token, the worker goes.
  for (auto& r : requests) {
    ASSERT_NE(r, nullptr);
    std::optional<Event> first;
    for (int waited = 0; waited < 300 && !first; ++waited) first = r->next(100ms);
    ASSERT_TRUE(first.has_value());
  }
  const std::string dead = workers.endpoint(0);
  workers.worker(0).stop();
  for (auto& r : requests) {
    const Outcome out = drain(*r);
    EXPECT_EQ(out.finish.finish_reason, "error");
    EXPECT_NE(out.finish.error.find(dead), std::string::npos) << out.finish.error;
  }
  const Outcome later = drain(*engine.submit(greedy_job(prompt(5), 4)));
  EXPECT_EQ(later.finish.finish_reason, "error");
  EXPECT_EQ(engine.metrics().requests_failed, 5u);
}

// With SessionOptions::recover (`weft serve --recover`), the same death
// places the model again on this host; every request goes on and gives the
// tokens it gives alone, and the engine serves the next one.
TEST_F(EngineTest, WithRecoverADeadStageIsPlacedAgainAndTheRequestsGoOn) {
  constexpr int kMax = 120;  // long enough that the worker stops mid-way
  std::vector<std::vector<int32_t>> want;
  {
    auto ref = session(256);
    for (int i = 0; i < 3; ++i)
      want.push_back(ref->generate(prompt(i), {.max_tokens = kMax, .stop_at_end_of_generation = false}).tokens);
  }
  weft::testing::LocalWorkers workers(1);
  weft::SessionOptions o{.model = *path_, .devices = {"cpu:1", "rpc://" + workers.endpoint(0)}};
  o.split = "1,1";
  o.recover = true;
  int recoveries = 0;
  o.on_recovery = [&](const weft::RecoveryReport& r) {
    ++recoveries;
    EXPECT_EQ(r.lost, std::vector<std::string>{workers.endpoint(0)});
  };
  weft::Session s(o);
  s.load(4 * 256);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  EXPECT_EQ(engine.metrics().groups, 2);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) {
    Job j = greedy_job(prompt(i), kMax);
    j.ignore_eos = true;
    requests.push_back(engine.submit(std::move(j)));
  }
  std::vector<Outcome> got(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_NE(requests[i], nullptr);
    std::optional<Event> first;
    for (int waited = 0; waited < 300 && !first; ++waited) first = requests[i]->next(100ms);
    ASSERT_TRUE(first.has_value());
    got[i].tokens = first->tokens;
  }
  workers.worker(0).stop();
  for (size_t i = 0; i < requests.size(); ++i) {
    const Outcome rest = drain(*requests[i]);
    got[i].tokens.insert(got[i].tokens.end(), rest.tokens.begin(), rest.tokens.end());
    EXPECT_NE(rest.finish.finish_reason, "error") << rest.finish.error;
    EXPECT_EQ(got[i].tokens, want[static_cast<size_t>(i)]) << "request " << i;
  }
  EXPECT_EQ(recoveries, 1);
  EXPECT_EQ(engine.metrics().recoveries, 1u);
  EXPECT_EQ(engine.metrics().groups, 1);  // one stage left
  EXPECT_EQ(engine.metrics().devices_lost, std::vector<std::string>{workers.endpoint(0)});  // /health: degraded
  const Outcome later = drain(*engine.submit(greedy_job(prompt(5), 4)));
  EXPECT_NE(later.finish.finish_reason, "error") << later.finish.error;
  EXPECT_EQ(engine.metrics().requests_failed, 0u);
}

// A worker lost and recovered from is back at its port: the idle engine
// takes it back (BatchEngine::rejoin; no request in flight, nothing to
// re-evaluate), the placement as started restored: two stages again,
// nothing missing (/health), the rejoin counted and reported; the same
// prompt again (its slot's cache was on the old placement: it must not be
// reused) gives its tokens alone, and a loss after the move recovers again.
TEST_F(EngineTest, WithRecoverAWorkerBackAtItsPortIsTakenBackWhileIdle) {
  constexpr int kMax = 120;
  const std::vector<int32_t> want = alone(prompt(0), 40);
  weft::SessionOptions o{.model = *path_};
  auto worker = worker_at(0);
  const std::string endpoint = worker->endpoint(0);
  const uint16_t port = static_cast<uint16_t>(worker->worker(0).port());
  o.devices = {"cpu:1", "rpc://" + endpoint};
  o.split = "1,1";
  o.recover = true;
  std::vector<weft::RejoinReport> rejoins;
  o.on_rejoin = [&](const weft::RejoinReport& r) { rejoins.push_back(r); };
  weft::Session s(o);
  s.load(4 * 256);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  Job j = greedy_job(prompt(0), kMax);
  j.ignore_eos = true;
  auto r = engine.submit(std::move(j));
  ASSERT_NE(r, nullptr);
  std::optional<Event> first;
  for (int waited = 0; waited < 300 && !first; ++waited) first = r->next(100ms);
  ASSERT_TRUE(first.has_value());
  worker.reset();  // gone: the request recovers onto this host
  EXPECT_NE(drain(*r).finish.finish_reason, "error");
  ASSERT_EQ(engine.metrics().devices_lost, std::vector<std::string>{endpoint});
  EXPECT_EQ(engine.metrics().groups, 1);
  EXPECT_EQ(engine.metrics().rejoins, 0u);

  worker = worker_at(port);
  ASSERT_EQ(worker->endpoint(0), endpoint);
  ASSERT_TRUE(rejoins_reach(engine, 1)) << "the worker back at " << endpoint << " was not taken back within 30 s";
  const weft::serve::EngineMetrics m = engine.metrics();
  EXPECT_TRUE(m.devices_lost.empty());
  EXPECT_EQ(m.groups, 2);  // two stages again
  EXPECT_EQ(m.recoveries, 1u);
  ASSERT_EQ(rejoins.size(), 1u);
  EXPECT_TRUE(rejoins[0].moved && rejoins[0].idle);
  EXPECT_EQ(rejoins[0].rejoined, std::vector<std::string>{endpoint});
  EXPECT_EQ(rejoins[0].plan.devices.size(), 2u);
  EXPECT_EQ(s.rejoins(), 1);
  const Outcome after = drain(*engine.submit(greedy_job(prompt(0), 40)));
  EXPECT_NE(after.finish.finish_reason, "error") << after.finish.error;
  EXPECT_EQ(after.tokens, want);
  EXPECT_GT(worker->worker(0).memory_in_use(), 0u) << "the worker taken back holds no part of the model";

  worker.reset();  // and lost again: recovered again
  const Outcome last = drain(*engine.submit(greedy_job(prompt(0), 40)));
  EXPECT_NE(last.finish.finish_reason, "error") << last.finish.error;
  EXPECT_EQ(last.tokens, want);
  EXPECT_EQ(engine.metrics().recoveries, 2u);
  EXPECT_EQ(engine.metrics().requests_failed, 0u);
}

// Two workers lost together come back one at a time: the idle engine takes
// each back as it answers (the other stays out, still missing), so the
// stages go 3 -> 1 -> 2 -> 3, and a request on the placement as started
// gives its tokens alone.
TEST_F(EngineTest, WithRecoverEachWorkerBackIsTakenBackOnItsOwn) {
  const ThreeLayerModel file(*path_);
  const std::string& model = file.path;
  const std::vector<int32_t> want = file.alone(prompt(1), 24);
  auto a = worker_at(0), b = worker_at(0);
  const std::string ea = a->endpoint(0), eb = b->endpoint(0);
  const auto pa = static_cast<uint16_t>(a->worker(0).port()), pb = static_cast<uint16_t>(b->worker(0).port());
  weft::SessionOptions o{.model = model, .devices = {"cpu:1", "rpc://" + ea, "rpc://" + eb}};
  o.split = "1,1,1";
  o.recover = true;
  std::vector<weft::RejoinReport> rejoins;
  o.on_rejoin = [&](const weft::RejoinReport& r) { rejoins.push_back(r); };
  weft::Session s(o);
  s.load(4 * 256);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  ASSERT_EQ(engine.metrics().groups, 3);
  a.reset();
  b.reset();
  const Outcome lost = drain(*engine.submit(greedy_job(prompt(0), 8)));
  EXPECT_NE(lost.finish.finish_reason, "error") << lost.finish.error;
  EXPECT_EQ(engine.metrics().devices_lost, (std::vector<std::string>{ea, eb}));
  EXPECT_EQ(engine.metrics().groups, 1);
  b = worker_at(pb);
  ASSERT_TRUE(rejoins_reach(engine, 1)) << eb << " was not taken back on its own";
  EXPECT_EQ(engine.metrics().devices_lost, std::vector<std::string>{ea});
  EXPECT_EQ(engine.metrics().groups, 2);
  ASSERT_EQ(rejoins.size(), 1u);
  EXPECT_EQ(rejoins[0].rejoined, std::vector<std::string>{eb});
  EXPECT_EQ(rejoins[0].plan.devices.size(), 2u);
  a = worker_at(pa);
  ASSERT_TRUE(rejoins_reach(engine, 2)) << ea << " was not taken back after " << eb;
  EXPECT_TRUE(engine.metrics().devices_lost.empty());
  EXPECT_EQ(engine.metrics().groups, 3);
  ASSERT_EQ(rejoins.size(), 2u);
  EXPECT_EQ(rejoins[1].plan.devices.size(), 3u);
  const Outcome after = drain(*engine.submit(greedy_job(prompt(1), 24)));
  EXPECT_NE(after.finish.finish_reason, "error") << after.finish.error;
  EXPECT_EQ(after.tokens, want);
  EXPECT_GT(a->worker(0).memory_in_use(), 0u);
  EXPECT_GT(b->worker(0).memory_in_use(), 0u);
  EXPECT_EQ(engine.metrics().requests_failed, 0u);
}

// A worker named while serving (`weft serve --workers-file`, re-read on
// SIGHUP: Engine::add_workers) joins the devices and is taken in once it
// answers and the engine is idle, without --recover: three stages, the
// worker holding its share; a request then gives its tokens alone.
TEST_F(EngineTest, AWorkerAddedWhileServingIsTakenInWhenIdle) {
  const ThreeLayerModel file(*path_);
  const std::vector<int32_t> want = file.alone(prompt(3), 24);
  auto a = worker_at(0), b = worker_at(0);
  weft::SessionOptions o{.model = file.path, .devices = {"cpu:1", "rpc://" + a->endpoint(0)}};
  o.probe = false;  // placed by memory: a layer each
  std::vector<weft::RejoinReport> rejoins;
  o.on_rejoin = [&](const weft::RejoinReport& r) { rejoins.push_back(r); };
  weft::Session s(o);
  s.load(4 * 256);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  ASSERT_EQ(engine.metrics().groups, 2);
  const std::string added = engine.add_workers({weft::worker_device_spec(b->endpoint(0))}).get();
  EXPECT_NE(added.find("1 new worker"), std::string::npos) << added;
  EXPECT_NE(added.find(b->endpoint(0)), std::string::npos) << added;
  ASSERT_TRUE(rejoins_reach(engine, 1)) << b->endpoint(0) << " was not taken in";
  EXPECT_TRUE(engine.metrics().devices_joining.empty());
  EXPECT_TRUE(engine.metrics().devices_lost.empty());
  EXPECT_EQ(engine.metrics().groups, 3);
  ASSERT_EQ(rejoins.size(), 1u);
  EXPECT_EQ(rejoins[0].rejoined, std::vector<std::string>{b->endpoint(0)});
  ASSERT_EQ(rejoins[0].plan.devices.size(), 3u);
  EXPECT_GT(rejoins[0].plan.devices[2].part.last_layer, rejoins[0].plan.devices[2].part.first_layer);
  const std::string again = engine.add_workers({weft::worker_device_spec(b->endpoint(0))}).get();
  EXPECT_NE(again.find("no new worker"), std::string::npos) << again;
  const Outcome after = drain(*engine.submit(greedy_job(prompt(3), 24)));
  EXPECT_NE(after.finish.finish_reason, "error") << after.finish.error;
  EXPECT_EQ(after.tokens, want);
  EXPECT_GT(b->worker(0).memory_in_use(), 0u);
}

// A worker taken out of the workers file while serving (Engine::
// remove_workers): placed, it is marked leaving and leaves when the engine
// is idle, the model placed again over this host and the other worker
// before its session ends (the worker then holds nothing); a request then
// gives its tokens alone. Removing it again, or a worker that is no
// device, removes nothing.
TEST_F(EngineTest, AWorkerRemovedWhileServingLeavesWhenIdle) {
  const ThreeLayerModel file(*path_);
  const std::vector<int32_t> want = file.alone(prompt(2), 24);
  auto a = worker_at(0), b = worker_at(0), c = worker_at(0);
  weft::SessionOptions o{.model = file.path,
                         .devices = {"cpu:1", "rpc://" + a->endpoint(0), "rpc://" + b->endpoint(0)}};
  o.probe = false;  // placed by memory: a layer each
  std::vector<weft::RejoinReport> reports;
  o.on_rejoin = [&](const weft::RejoinReport& r) { reports.push_back(r); };
  weft::Session s(o);
  s.load(4 * 256);
  Engine engine(s, {.slots = 4, .max_queue = 8, .batch_tokens = 6});
  ASSERT_EQ(engine.metrics().groups, 3);
  EXPECT_GT(b->worker(0).memory_in_use(), 0u);
  const std::string removed = engine.remove_workers({weft::worker_device_spec(b->endpoint(0))}).get();
  EXPECT_NE(removed.find("1 worker(s) removed"), std::string::npos) << removed;
  EXPECT_NE(removed.find(b->endpoint(0)), std::string::npos) << removed;
  for (int waited = 0; waited < 300 && engine.metrics().groups != 2; ++waited) std::this_thread::sleep_for(100ms);
  const weft::serve::EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.groups, 2);
  EXPECT_TRUE(m.devices_leaving.empty());
  EXPECT_TRUE(m.devices_lost.empty());
  ASSERT_EQ(m.device_specs.size(), 2u);
  EXPECT_EQ(m.device_specs[1].label(), a->endpoint(0));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].moved) << reports[0].declined;
  EXPECT_EQ(reports[0].removed, std::vector<std::string>{b->endpoint(0)});
  EXPECT_TRUE(reports[0].rejoined.empty());
  EXPECT_EQ(m.rejoins, 0u);  // a departure is not a rejoin
  for (int waited = 0; waited < 50 && b->worker(0).memory_in_use() > 0; ++waited) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(b->worker(0).memory_in_use(), 0u);  // its session ended with the move
  const std::string again =
      engine.remove_workers({weft::worker_device_spec(b->endpoint(0)), weft::worker_device_spec(c->endpoint(0))}).get();
  EXPECT_NE(again.find("no worker removed"), std::string::npos) << again;
  const Outcome after = drain(*engine.submit(greedy_job(prompt(2), 24)));
  EXPECT_NE(after.finish.finish_reason, "error") << after.finish.error;
  EXPECT_EQ(after.tokens, want);
  EXPECT_EQ(engine.metrics().requests_failed, 0u);
}

// --split gives every device its share: a worker added later has none, so
// nothing is added, and the answer says why; the engine serves on.
TEST_F(EngineTest, AWorkerAddedToSplitSharesIsRefused) {
  auto a = worker_at(0), b = worker_at(0);
  weft::SessionOptions o{.model = *path_, .devices = {"cpu:1", "rpc://" + a->endpoint(0)}};
  o.split = "1,1";
  weft::Session s(o);
  s.load(4 * 128);
  Engine engine(s, {.slots = 4});
  const std::string answer = engine.add_workers({weft::worker_device_spec(b->endpoint(0))}).get();
  EXPECT_NE(answer.find("nothing added"), std::string::npos) << answer;
  EXPECT_NE(answer.find("--split"), std::string::npos) << answer;
  EXPECT_TRUE(engine.metrics().devices_joining.empty());
  EXPECT_NE(drain(*engine.submit(greedy_job(prompt(0), 4))).finish.finish_reason, "error");
}

}  // namespace
