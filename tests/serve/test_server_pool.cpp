// GET /v1/pool while the placement changes under it (docs/serve.md "The
// pool", docs/recovery.md): a server over this host and a worker, with
// --recover, polled from another thread the whole time. The worker dies
// and the next request recovers: the pool shows the placement in force (this host alone) and
// the lost worker marked lost; the worker comes back at its port: the idle
// server takes it back and the pool shows both devices again, none lost.
// The poller reads while the engine's thread recovers and rejoins (the
// pool once read the Session's devices from its HTTP thread, a race TSan
// reports only when the two accesses meet, and showed the load's plan for
// good: this test fails on that code, host layers [0, 1] after the loss).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "rpc/local_workers.h"
#include "serve/http_client.h"
#include "weft/backend/cpu.h"
#include "weft/model/demo_model.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using serve_test::request;

json pool(int port) {
  const serve_test::Response r = request(port, "GET", "/v1/pool");
  return r.status == 200 ? json::parse(r.body) : json();
}

// Polls the pool until pred holds of it, for up to 30 s.
template <class P>
json pool_when(int port, P pred) {
  for (int i = 0; i < 300; ++i) {
    const json p = pool(port);
    if (!p.is_null() && pred(p)) return p;
    std::this_thread::sleep_for(100ms);
  }
  return json();
}

// Reads /v1/pool again and again from a thread of its own until stopped.
class Poller {
 public:
  explicit Poller(int port) : thread_([this, port] {
    while (!stop_.load()) {
      (void)request(port, "GET", "/v1/pool");
      ++polls_;
    }
  }) {}
  ~Poller() { stop(); }
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;
  int stop() {  // the polls made
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return polls_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> polls_{0};
  std::thread thread_;
};

TEST(ServerPool, ShowsThePlacementInForceThroughALossAndARejoin) {
  const std::string model = (fs::temp_directory_path() / ("weft_pool_" + std::to_string(::getpid()) + ".gguf")).string();
  weft::model::write_demo_model(model, weft::model::tiny_demo_spec());
  struct Remove {
    std::string path;
    ~Remove() { fs::remove(path); }
  } remove{model};
  auto worker = std::make_unique<weft::testing::LocalWorkers>(1);
  const std::string endpoint = worker->endpoint(0);
  const auto port = static_cast<uint16_t>(worker->worker(0).port());
  weft::serve::ServeOptions o;
  o.session.model = model;
  o.session.devices = {"cpu:1", "rpc://" + endpoint};
  o.session.split = "1,1";
  o.session.recover = true;
  o.ctx_size = 512;
  o.parallel = 2;
  o.port = 0;
  o.log = false;
  weft::serve::Server server(o);
  server.start();
  server.wait_ready();
  const int http = server.port();
  const json first = pool(http);
  ASSERT_EQ(first["devices"].size(), 2u);
  // The worker's kernels and threads, as its device describes itself.
  EXPECT_EQ(first["devices"][1]["simd"], weft::cpu_simd_level()) << first.dump();
  EXPECT_TRUE(first["devices"][1]["threads"].is_number_integer() && first["devices"][1]["threads"].get<int>() > 0)
      << first.dump();

  Poller poller(http);
  worker.reset();  // the next step meets the loss and recovers onto this host
  const serve_test::Response during = request(http, "POST", "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Go on."}],"max_tokens":40,"temperature":0,"ignore_eos":true})");
  EXPECT_EQ(during.status, 200) << during.body;
  const json degraded = pool_when(http, [&](const json& p) { return p["engine"]["recoveries"] == 1; });
  ASSERT_FALSE(degraded.is_null()) << "no recovery seen in the pool";
  ASSERT_EQ(degraded["devices"].size(), 2u) << degraded.dump();
  EXPECT_EQ(degraded["devices"][0]["label"], "host");
  EXPECT_EQ(degraded["devices"][0]["layers"], json::array({0, 2}));  // the model on this host alone
  EXPECT_FALSE(degraded["devices"][0]["lost"].get<bool>());
  EXPECT_EQ(degraded["devices"][1]["label"], endpoint);
  EXPECT_TRUE(degraded["devices"][1]["lost"].get<bool>());
  EXPECT_TRUE(degraded["devices"][1]["link"].is_null());

  worker = std::make_unique<weft::testing::LocalWorkers>(1, std::function<std::unique_ptr<weft::Device>(int)>{}, port);
  const json back = pool_when(http, [&](const json& p) { return p["engine"]["rejoins"] == 1; });
  ASSERT_FALSE(back.is_null()) << "the worker back at " << endpoint << " was not taken back";
  ASSERT_EQ(back["devices"].size(), 2u) << back.dump();
  EXPECT_EQ(back["devices"][1]["label"], endpoint);
  EXPECT_FALSE(back["devices"][1]["lost"].get<bool>());
  EXPECT_EQ(back["devices"][1]["layers"], json::array({1, 2}));  // --split 1,1 again
  EXPECT_TRUE(back["engine"]["devices_lost"].empty());
  EXPECT_GT(poller.stop(), 10);
  const serve_test::Response r = request(http, "POST", "/v1/chat/completions",
                                         R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4})");
  EXPECT_EQ(r.status, 200) << r.body;
  // Idle after it: each device's compute per step since the rejoin, measured.
  const json measured = pool_when(http, [](const json& p) {
    for (const json& d : p["devices"])
      if (!d["measured_ms_per_step"].is_number() || d["measured_ms_per_step"].get<double>() <= 0) return false;
    return true;
  });
  if (measured.is_null()) {
    json p = pool(http);
    std::string ms;
    for (const json& d : p["devices"]) ms += d["measured_ms_per_step"].dump() + " ";
    ADD_FAILURE() << "no device's time per step measured: " << ms << " steps " << p["engine"]["steps"];
  }
  server.stop();
}

}  // namespace
