// Rejoin (docs/recovery.md "Rejoin"): the rule that weighs a move back
// against hand-worked numbers; the background watch that finds a worker
// back at its port; and a Session whose lost worker returns when too few
// tokens are left to pay for the move: it stays out, the text unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/rejoin.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A worker on loopback at a given port (0: any), serving one 1-thread CPU.
struct RejoinTestWorker {
  explicit RejoinTestWorker(uint16_t port = 0) : device(weft::make_cpu_device(1)) {
    weft::rpc::WorkerOptions o;
    o.log = false;
    o.port = port;
    worker = std::make_unique<weft::rpc::Worker>(std::vector<weft::Device*>{device.get()}, o);
    worker->start();
  }
  ~RejoinTestWorker() { worker.reset(); }  // before its device
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(worker->port()); }
  std::unique_ptr<weft::Device> device;
  std::unique_ptr<weft::rpc::Worker> worker;
};

TEST(RejoinEstimate, PaysWhenTheTimeSavedExceedsTheMove) {
  // 90 ms a token now, 50 with the worker: 40 ms saved a token.
  weft::RejoinEstimate e{.seconds_per_token_now = 0.09, .seconds_per_token_with = 0.05, .remaining_tokens = 40,
                         .move_seconds = 0.8};
  EXPECT_NEAR(e.gain_seconds(), 1.6, 1e-12);  // 0.04 * 40
  EXPECT_TRUE(e.pays());
  e.remaining_tokens = 20;  // 0.8 saved: not more than the move
  EXPECT_NEAR(e.gain_seconds(), 0.8, 1e-12);
  EXPECT_FALSE(e.pays());
  e.remaining_tokens = 21;  // 0.84
  EXPECT_TRUE(e.pays());
  e.remaining_tokens = 0;
  e.move_seconds = -1;  // nothing left to win: never, whatever the cost
  EXPECT_FALSE(e.pays());
  // Faster without the worker: a move never pays.
  weft::RejoinEstimate slower{.seconds_per_token_now = 0.05, .seconds_per_token_with = 0.06,
                              .remaining_tokens = 1000, .move_seconds = 0};
  EXPECT_LT(slower.gain_seconds(), 0);
  EXPECT_FALSE(slower.pays());
}

TEST(RejoinWatch, FindsAWorkerBackAtItsPortAndBacksOffBefore) {
  uint16_t port = 0;
  {
    RejoinTestWorker gone;
    port = gone.worker->port();
  }  // nothing listens there now
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  weft::RejoinWatch watch({}, milliseconds(20), milliseconds(80));
  EXPECT_FALSE(watch.answered(endpoint));
  watch.watch(endpoint);
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(watch.answered(endpoint));
  // Refused at once each time: 20, 40, 80, 80 ... ms apart, so a handful
  // of probes in 400 ms, not hundreds.
  const uint64_t probes = watch.probes();
  EXPECT_GE(probes, 3u);
  EXPECT_LE(probes, 12u);
  RejoinTestWorker back(port);
  const auto t0 = std::chrono::steady_clock::now();
  while (!watch.answered(endpoint) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3))
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(watch.answered(endpoint));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1000));  // within a backoff and a handshake
  watch.forget(endpoint);
  EXPECT_FALSE(watch.answered(endpoint));
}

class SessionRejoin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_rejoin_" + std::to_string(::getpid()) + ".gguf")).string());
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
  static std::vector<int32_t> prompt() { return {1, 45, 212, 87, 301, 9, 77}; }
  static weft::GenerateOptions greedy(int n) {
    weft::GenerateOptions g;
    g.max_tokens = n;
    g.stop_at_end_of_generation = false;
    return g;
  }
  static std::string* path_;
};
std::string* SessionRejoin::path_ = nullptr;

// The last stage is lost at token 6 of 24 and is back at its port by token
// 21: three tokens left cannot pay for a reload and a re-prefill of 28
// tokens. It stays out, the report says why, and the text is unchanged.
TEST_F(SessionRejoin, AWorkerBackWithTooFewTokensLeftStaysOut) {
  constexpr int kTokens = 24;
  std::vector<int32_t> want;
  {
    weft::Session s(options({"cpu:1"}, ""));
    s.load(128);
    want = s.generate(prompt(), greedy(kTokens)).tokens;
  }
  RejoinTestWorker w0;
  auto w1 = std::make_unique<RejoinTestWorker>();
  const uint16_t port1 = w1->worker->port();
  const std::string e1 = w1->endpoint();
  std::vector<weft::RejoinReport> rejoins;
  weft::SessionOptions o = options({"cpu:1", "rpc://" + w0.endpoint(), "rpc://" + e1}, "1,1,2");
  o.recover = true;
  o.on_rejoin = [&](const weft::RejoinReport& r) { rejoins.push_back(r); };
  weft::Session s(o);
  s.load(128);
  int seen = 0;
  const weft::GenerateResult r = s.generate(prompt(), greedy(kTokens), [&](int32_t) {
    ++seen;
    if (seen == 6) w1->worker->stop();
    if (seen == 20) {
      w1.reset();
      w1 = std::make_unique<RejoinTestWorker>(port1);  // back at its address
      std::this_thread::sleep_for(milliseconds(1300));  // the watch's longest backoff, and its handshake
    }
    return true;
  });
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(s.recoveries(), 1);
  EXPECT_EQ(s.rejoins(), 0);
  ASSERT_EQ(rejoins.size(), 1u);
  EXPECT_FALSE(rejoins[0].moved);
  ASSERT_EQ(rejoins[0].rejoined.size(), 1u);
  EXPECT_EQ(rejoins[0].rejoined[0], e1);
  EXPECT_FALSE(rejoins[0].declined.empty());
  EXPECT_LE(rejoins[0].estimate.remaining_tokens, 4);  // weighed at token 21
  EXPECT_GT(rejoins[0].estimate.move_seconds, 0);
  EXPECT_FALSE(rejoins[0].estimate.pays());
  EXPECT_EQ(s.stats().size(), 2u);  // this host and the worker that stayed
}

}  // namespace
