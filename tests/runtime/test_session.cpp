// Session end to end on a tiny demo model: one CPU, the CPU plus an
// asynchronous device with memory of its own, the CPU plus a worker over
// loopback TCP; the plan, the fit check and the errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_session_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 3;
    weft::model::write_demo_model(*path_, spec);
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  // A worker over loopback TCP holding at most budget bytes.
  std::string start_worker(size_t budget = SIZE_MAX) {
    worker_cpu_ = weft::make_cpu_device(1);
    weft::rpc::WorkerOptions o;
    o.log = false;
    o.memory_budget = budget;
    worker_ = std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{worker_cpu_.get()}, o);
    worker_->start();
    return "127.0.0.1:" + std::to_string(worker_->port());
  }

  static weft::SessionOptions options(std::vector<std::string> devices, std::string split = "") {
    return {.model = *path_, .devices = std::move(devices), .split = std::move(split)};
  }

  static std::vector<int32_t> greedy(weft::Session& s, int n) {
    const std::vector<int32_t> prompt = s.tokenizer().encode(weft::model::kDemoPrompt, true);
    s.load(static_cast<int64_t>(prompt.size()) + n);
    weft::GenerateOptions o{.max_tokens = n, .stop_at_end_of_generation = false};
    return s.generate(prompt, o).tokens;
  }

  static std::string* path_;
  std::unique_ptr<weft::Device> worker_cpu_;
  std::unique_ptr<weft::rpc::Worker> worker_;
};
std::string* SessionTest::path_ = nullptr;

TEST_F(SessionTest, SplitMatchesOneCpu) {
  weft::Session local(options({"cpu:1"}));
  const std::vector<int32_t> want = greedy(local, 8);
  ASSERT_EQ(want.size(), 8u);

  weft::Session with_async(options({"cpu:1", "async-copy"}, "1,2"));
  EXPECT_EQ(greedy(with_async, 8), want);

  const std::string endpoint = start_worker();
  weft::Session with_worker(options({"cpu:1", "rpc://" + endpoint}, "2,1"));
  EXPECT_EQ(greedy(with_worker, 8), want);
  const std::vector<weft::DeviceStats> stats = with_worker.stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_FALSE(stats[0].remote);
  EXPECT_TRUE(stats[1].remote);
  EXPECT_EQ(stats[1].label, endpoint);
  EXPECT_GT(stats[1].rpc.bytes_sent, 0u);  // the weights went over the wire
}

// Over TLS (tls://HOST:PORT#FINGERPRINT) the text is the local text, and
// the workers push to each other over a TLS peer link pinned by this host.
TEST_F(SessionTest, OverTlsTheTextIsTheSame) {
  weft::Session local(options({"cpu:1"}));
  const std::vector<int32_t> want = greedy(local, 8);
  const fs::path dir = fs::temp_directory_path() / ("weft_session_tls_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::unique_ptr<weft::Device>> cpus;
  std::vector<std::unique_ptr<weft::rpc::Worker>> workers;
  std::vector<std::string> devices = {"cpu:1"};
  for (int i = 0; i < 2; ++i) {
    weft::rpc::WorkerOptions o;
    o.log = false;
    o.tls_cert = dir / ("w" + std::to_string(i) + "-cert.pem");
    o.tls_key = dir / ("w" + std::to_string(i) + "-key.pem");
    weft::rpc::make_self_signed_certificate(o.tls_cert, o.tls_key);
    cpus.push_back(weft::make_cpu_device(1));
    workers.push_back(std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{cpus.back().get()}, o));
    workers.back()->start();
    devices.push_back("tls://127.0.0.1:" + std::to_string(workers.back()->port()) + "#" + workers.back()->tls_fingerprint());
  }
  {
    weft::SessionOptions o = options(devices, "1,1,1");
    o.device_options.rpc.trust_on_first_use = false;
    weft::Session over_tls(o);
    EXPECT_EQ(greedy(over_tls, 8), want);
    const std::vector<weft::DeviceStats> stats = over_tls.stats();
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(stats[1].rpc.peer_link_failure, "") << "the activations went through this host";
  }
  workers.clear();
  fs::remove_all(dir);
}

TEST_F(SessionTest, PlanFollowsTheSplitAndCountsEveryByte) {
  weft::Session s(options({"cpu:1", "async", "async"}, "1,0,2"));
  const weft::LoadPlan plan = s.plan(32);
  ASSERT_EQ(plan.devices.size(), 3u);
  EXPECT_EQ(plan.policy, "split 1,0,2");
  EXPECT_EQ(plan.devices[0].part.first_layer, 0);
  EXPECT_EQ(plan.devices[0].part.last_layer, 1);
  EXPECT_EQ(plan.devices[1].part.last_layer, 1);  // no layers
  EXPECT_EQ(plan.devices[2].part.last_layer, 3);
  EXPECT_EQ(plan.devices[1].part.kv_cache_bytes, 0u);
  EXPECT_EQ(plan.devices[0].label, "host");
  // Every layer holds the same KV cache: 32 positions, keys and values, f16.
  const auto& p = s.params();
  const size_t per_layer = 2 * 32 * static_cast<size_t>(p.head_dim * p.n_head_kv) * 2;
  EXPECT_EQ(plan.devices[0].part.kv_cache_bytes, per_layer);
  EXPECT_EQ(plan.devices[2].part.kv_cache_bytes, 2 * per_layer);
  size_t weights = 0;
  for (const auto& d : plan.devices) weights += d.part.weight_bytes;
  EXPECT_GT(weights, 0u);
  EXPECT_TRUE(plan.problem().empty());
  weft::LoadPlan other = plan;  // a plan for other devices is refused
  other.devices.pop_back();
  EXPECT_THROW(s.load(other), weft::Error);
  // load() places the same way and returns the plan it used.
  const weft::LoadPlan loaded = s.load(32);
  EXPECT_EQ(loaded.devices[2].part.first_layer, 1);
  EXPECT_TRUE(s.loaded());
  EXPECT_EQ(s.n_ctx(), 32);
  EXPECT_THROW(s.load(32), weft::Error);  // once
}

TEST_F(SessionTest, ShareThatDoesNotFitIsRefusedBeforeLoading) {
  const std::string endpoint = start_worker(8 << 10);  // 8 KiB: less than a layer
  weft::Session s(options({"cpu:1", "rpc://" + endpoint}, "1,1"));
  const weft::LoadPlan plan = s.plan(64);
  EXPECT_FALSE(plan.devices[1].fits());
  EXPECT_NE(plan.problem().find(endpoint + " has 8.0 KiB free but its share needs"), std::string::npos)
      << plan.problem();
  try {
    s.load(64);
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::out_of_memory);
  }
  EXPECT_FALSE(s.loaded());
  // Nothing was uploaded: the worker holds at most its per-session
  // bookkeeping (a few bytes, charged while a command is in flight), not
  // the ~50 KiB of a layer.
  EXPECT_LT(worker_->memory_in_use(), 1024u);
  EXPECT_LT(s.stats()[1].rpc.bytes_sent, 4096u);
}

TEST_F(SessionTest, ProbedPlacementPredictsEachStage) {
  weft::Session local(options({"cpu:1"}));
  const std::vector<int32_t> want = greedy(local, 8);
  const std::string endpoint = start_worker();
  weft::Session s(options({"cpu:1", "rpc://" + endpoint}));
  const weft::LoadPlan plan = s.plan(32);
  EXPECT_EQ(plan.policy, "by speed");
  ASSERT_EQ(plan.devices.size(), 2u);
  EXPECT_TRUE(std::isfinite(plan.predicted_seconds) && plan.predicted_seconds > 0) << plan.predicted_seconds;
  const weft::DeviceSpeed& host = plan.devices[0].speed;
  const weft::DeviceSpeed& worker = plan.devices[1].speed;
  EXPECT_TRUE(std::isfinite(host.seconds_per_byte) && host.seconds_per_byte > 0) << host.seconds_per_byte;
  EXPECT_EQ(host.latency_seconds, 0);  // no link to this host's own CPU
  EXPECT_EQ(host.bytes_per_second, 0);
  EXPECT_TRUE(std::isfinite(worker.seconds_per_byte) && worker.seconds_per_byte > 0) << worker.seconds_per_byte;
  EXPECT_TRUE(std::isfinite(worker.latency_seconds) && worker.latency_seconds > 0) << worker.latency_seconds;
  EXPECT_TRUE(std::isfinite(worker.bytes_per_second) && worker.bytes_per_second > 0) << worker.bytes_per_second;
  double sum = 0;
  for (const weft::DevicePlan& d : plan.devices) {
    EXPECT_TRUE(std::isfinite(d.predicted_seconds) && d.predicted_seconds >= 0) << d.predicted_seconds;
    sum += d.predicted_seconds + d.predicted_link_seconds;
  }
  EXPECT_GT(plan.devices[1].predicted_link_seconds, 0);  // the worker takes part: it holds the output norm
  EXPECT_LE(sum, plan.predicted_seconds * (1 + 1e-12));  // and the hop back, when there is one
  EXPECT_LT(s.stats()[1].rpc.bytes_sent, (size_t{4} << 20) + 65536);  // the probe's upload is bounded
  EXPECT_EQ(greedy(s, 8), want);

  // --split still decides, and is predicted; without the probe nothing is.
  weft::Session split(options({"cpu:1", "rpc://" + endpoint}, "1,1"));
  const weft::LoadPlan sp = split.plan(32);
  EXPECT_EQ(sp.policy, "split 1,1");
  EXPECT_EQ(sp.devices[1].part.first_layer, 2);
  EXPECT_GT(sp.predicted_seconds, 0);
  weft::SessionOptions o = options({"cpu:1", "rpc://" + endpoint});
  o.probe = false;
  weft::Session unprobed(o);
  const weft::LoadPlan up = unprobed.plan(32);
  EXPECT_EQ(up.policy, "by free memory");
  EXPECT_EQ(up.predicted_seconds, 0);
  EXPECT_FALSE(up.devices[1].speed.measured());
}

TEST_F(SessionTest, FailedProbeFallsBackToFreeMemoryAndSaysWhy) {
  const std::string endpoint = start_worker(8 << 10);
  weft::Session s(options({"cpu:1", "rpc://" + endpoint}));
  const weft::LoadPlan plan = s.plan(64);
  EXPECT_EQ(plan.policy.rfind("by free memory (the probe of " + endpoint + " failed: [probe] ", 0), 0u) << plan.policy;
  EXPECT_NE(plan.policy.find("too little to measure"), std::string::npos) << plan.policy;
  EXPECT_EQ(plan.predicted_seconds, 0);
  EXPECT_LT(s.stats()[1].rpc.bytes_sent, 4096u);  // it stopped before uploading anything
}

TEST_F(SessionTest, PerplexityAgreesLocalAndSplit) {
  weft::Session local(options({"cpu:1"}));
  const std::vector<int32_t> tokens = local.tokenizer().encode(
      std::string(weft::model::kDemoPrompt) + " " + weft::model::kDemoPrompt + " " + weft::model::kDemoPrompt, true);
  ASSERT_GE(tokens.size(), 16u);
  local.load(8);
  const weft::model::PerplexityScore a = local.perplexity(tokens, 2);
  weft::Session split(options({"cpu:1", "async-copy"}, "1,1"));
  split.load(8);
  const weft::model::PerplexityScore b = split.perplexity(tokens, 2);
  EXPECT_EQ(a.count(), 2 * 3);  // rows ctx/2 .. ctx-2 of each chunk
  EXPECT_TRUE(std::isfinite(a.perplexity()));
  EXPECT_GT(a.perplexity(), 1.0);
  EXPECT_NEAR(a.perplexity(), b.perplexity(), 1e-3 * a.perplexity());
}

TEST_F(SessionTest, ErrorsNameWhatIsWrong) {
  EXPECT_THROW(weft::Session(options({})), weft::Error);
  EXPECT_THROW(weft::Session(options({"cpu", "tpu"})), weft::Error);
  EXPECT_THROW(weft::Session(options({"cpu", "async"}, "1")), weft::Error);  // one weight for two devices
  weft::SessionOptions missing = options({"cpu"});
  missing.model = "/nonexistent/model.gguf";
  EXPECT_THROW(weft::Session{missing}, weft::Error);
  // A worker nobody listens on: disconnected, not a crash.
  try {
    weft::Session s(options({"cpu", "rpc://127.0.0.1:1"}));
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::disconnected) << e.what();
  }
  weft::Session s(options({"cpu:1"}));
  const int32_t tok = 1;
  EXPECT_THROW(s.eval({&tok, 1}, 0), weft::Error);  // before load
  s.load(8);
  EXPECT_THROW(s.eval({&tok, 1}, 8), weft::Error);  // past the context
  const std::vector<int32_t> nine(9, 1);
  EXPECT_THROW(s.generate(nine, {}), weft::Error);  // the prompt does not fit
}

}  // namespace
