// Going on after a worker's death (SessionOptions::recover,
// docs/recovery.md): a worker holding layers stops at a token of a greedy
// generation; the Session re-places the model over the devices left,
// re-evaluates the tokens so far and continues, and the text equals the
// uninterrupted run's. When the devices left cannot hold the model the
// error says so; without recover the death ends the generation, naming the
// worker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rpc/local_workers.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;

constexpr int kRecoveryTokens = 20;
constexpr int kStopAt = 6;  // the token whose evaluation meets the dead worker

class SessionRecovery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_recovery_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 4;
    spec.tied = false;
    weft::model::write_demo_model(*path_, spec);
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  static weft::SessionOptions options(std::vector<std::string> devices, std::string split) {
    weft::SessionOptions o{.model = *path_, .devices = std::move(devices), .split = std::move(split)};
    o.probe = false;
    o.device_options.cpu_threads = 1;
    return o;
  }
  // This host and two workers, layers 1,1,2, recovering into reports.
  static weft::SessionOptions recovering(weft::testing::LocalWorkers& workers,
                                         std::vector<weft::RecoveryReport>& reports) {
    weft::SessionOptions o = options({"cpu:1", "rpc://" + workers.endpoint(0), "rpc://" + workers.endpoint(1)}, "1,1,2");
    o.recover = true;
    o.on_recovery = [&reports](const weft::RecoveryReport& r) { reports.push_back(r); };
    return o;
  }
  static std::vector<int32_t> prompt() { return {1, 45, 212, 87, 301, 9, 77}; }
  static weft::GenerateOptions greedy() {
    weft::GenerateOptions g;
    g.max_tokens = kRecoveryTokens;
    g.stop_at_end_of_generation = false;
    return g;
  }
  // The uninterrupted run, on this CPU alone.
  static std::vector<int32_t> reference() {
    weft::Session s(options({"cpu:1"}, ""));
    s.load(128);
    return s.generate(prompt(), greedy()).tokens;
  }

  static std::string* path_;
};
std::string* SessionRecovery::path_ = nullptr;

TEST_F(SessionRecovery, ALostStageIsReplacedAndTheTextIsTheSame) {
  const std::vector<int32_t> want = reference();
  for (int victim : {1, 0}) {  // the last stage (it holds the output), then the middle one
    SCOPED_TRACE("worker " + std::to_string(victim) + " stops");
    weft::testing::LocalWorkers workers(2);
    std::vector<weft::RecoveryReport> reports;
    weft::Session s(recovering(workers, reports));
    s.load(128);
    int seen = 0;
    const weft::GenerateResult r = s.generate(prompt(), greedy(), [&](int32_t) {
      if (++seen == kStopAt) workers.worker(victim).stop();
      return true;
    });
    EXPECT_EQ(r.tokens, want);
    EXPECT_EQ(r.stop, weft::StopReason::max_tokens);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(s.recoveries(), 1);
    ASSERT_EQ(reports[0].lost.size(), 1u);
    EXPECT_EQ(reports[0].lost[0], workers.endpoint(victim));
    EXPECT_EQ(reports[0].tokens_reevaluated, static_cast<int64_t>(prompt().size()) + kStopAt);
    ASSERT_EQ(reports[0].plan.devices.size(), 2u);  // this host and the worker left
    EXPECT_EQ(reports[0].plan.devices[1].label, workers.endpoint(1 - victim));
    EXPECT_EQ(reports[0].plan.devices[0].part.first_layer, 0);
    EXPECT_EQ(reports[0].plan.devices[1].part.last_layer, 4);
    EXPECT_EQ(s.stats().size(), 2u);
  }
}

// `weft run --parallel` (and `weft serve`, through the same engine): the
// sequences re-evaluate their own tokens after the recovery and go on; each
// equals its uninterrupted run.
TEST_F(SessionRecovery, ParallelSequencesGoOnAfterALostStage) {
  const std::vector<std::vector<int32_t>> prompts{prompt(), {1, 300, 17, 5}, {1, 99, 98}};
  std::vector<std::vector<int32_t>> want;
  {
    weft::Session s(options({"cpu:1"}, ""));
    s.load(3 * 64);
    for (const weft::GenerateResult& r : s.generate_parallel(prompts, greedy())) want.push_back(r.tokens);
  }
  weft::testing::LocalWorkers workers(2);
  std::vector<weft::RecoveryReport> reports;
  weft::Session s(recovering(workers, reports));
  s.load(3 * 64);
  int seen = 0;
  const std::vector<weft::GenerateResult> got = s.generate_parallel(prompts, greedy(), [&](int, int32_t) {
    if (++seen == 3 * kStopAt) workers.worker(1).stop();
    return true;
  });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i]) << "sequence " << i;
    EXPECT_EQ(got[i].stop, weft::StopReason::max_tokens);
  }
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(s.recoveries(), 1);
  ASSERT_EQ(reports[0].lost.size(), 1u);
  EXPECT_EQ(reports[0].lost[0], workers.endpoint(1));
  EXPECT_EQ(reports[0].plan.devices.size(), 2u);
}

// A generation that continues the cache of an earlier one (`weft chat`'s
// next turn, GenerateOptions::start > 0) recovers from the Session's
// history of what the cache holds: the second turn's text is unchanged.
TEST_F(SessionRecovery, AContinuedGenerationRecoversFromTheEarlierTurns) {
  // Turn 2 feeds turn 1's last token (never evaluated) and two more.
  const auto turns = [](weft::Session& s, const std::function<bool(int32_t)>& on_token2) {
    const weft::GenerateResult first = s.generate(prompt(), greedy());
    const std::vector<int32_t> next{first.tokens.back(), 45, 46};
    weft::GenerateOptions g = greedy();
    g.start = static_cast<int64_t>(prompt().size() + first.tokens.size()) - 1;
    return s.generate(next, g, on_token2).tokens;
  };
  weft::Session local(options({"cpu:1"}, ""));
  local.load(128);
  const std::vector<int32_t> want = turns(local, {});
  weft::testing::LocalWorkers workers(2);
  std::vector<weft::RecoveryReport> reports;
  weft::Session s(recovering(workers, reports));
  s.load(128);
  int seen = 0;
  const std::vector<int32_t> got = turns(s, [&](int32_t) {
    if (++seen == kStopAt) workers.worker(1).stop();
    return true;
  });
  EXPECT_EQ(got, want);
  ASSERT_EQ(reports.size(), 1u);
  // Turn 1's prompt and tokens, turn 2's prompt and its first tokens.
  EXPECT_EQ(reports[0].tokens_reevaluated, static_cast<int64_t>(prompt().size()) + kRecoveryTokens - 1 + 3 + kStopAt);
}

TEST_F(SessionRecovery, WithoutRecoverTheDeathEndsTheRunNamingTheWorker) {
  weft::testing::LocalWorkers workers(2);
  weft::Session s(options({"cpu:1", "rpc://" + workers.endpoint(0), "rpc://" + workers.endpoint(1)}, "1,1,2"));
  s.load(128);
  int seen = 0;
  try {
    s.generate(prompt(), greedy(), [&](int32_t) {
      if (++seen == kStopAt) workers.worker(1).stop();
      return true;
    });
    FAIL() << "the generation went on without its worker";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::disconnected);
    EXPECT_NE(std::string(e.what()).find(workers.endpoint(1)), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.recoveries(), 0);
}

// Two workers, each with room for a little more than half the model: when
// one goes, the other cannot hold it all, and the error says what is missing.
TEST_F(SessionRecovery, WhenTheDevicesLeftCannotHoldTheModelTheErrorSaysSo) {
  // Wider than the suite's model: its half dwarfs the room a step computes in.
  const std::string wide = *path_ + ".wide.gguf";
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_layer = 4;
  spec.n_embd = 256;
  spec.n_ff = 512;
  weft::model::write_demo_model(wide, spec);
  size_t need = 0;
  {
    weft::SessionOptions o = options({"cpu:1"}, "");
    o.model = wide;
    weft::Session s(o);
    need = s.plan(128).devices[0].need_bytes();
  }
  auto cpu0 = weft::make_cpu_device(1), cpu1 = weft::make_cpu_device(1);
  std::vector<std::unique_ptr<weft::rpc::Worker>> workers;
  for (weft::Device* d : {cpu0.get(), cpu1.get()}) {
    weft::rpc::WorkerOptions wo;
    wo.log = false;
    wo.memory_budget = need / 2 + (size_t{1} << 20);  // half the model, and room to compute
    workers.push_back(std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{d}, wo));
    workers.back()->start();
  }
  const std::string e0 = "127.0.0.1:" + std::to_string(workers[0]->port());
  const std::string e1 = "127.0.0.1:" + std::to_string(workers[1]->port());
  weft::SessionOptions o = options({"rpc://" + e0, "rpc://" + e1}, "1,1");
  o.model = wide;
  o.recover = true;
  weft::Session s(o);
  s.load(128);
  int seen = 0;
  try {
    s.generate(prompt(), greedy(), [&](int32_t) {
      if (++seen == kStopAt) workers[1]->stop();
      return true;
    });
    FAIL() << "the generation went on on a device that cannot hold the model";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::out_of_memory) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("after losing " + e1), std::string::npos) << what;
    EXPECT_NE(what.find(e0 + " has"), std::string::npos) << what;
    EXPECT_NE(what.find("free but its share needs"), std::string::npos) << what;
  }
  fs::remove(wide);
}

}  // namespace
