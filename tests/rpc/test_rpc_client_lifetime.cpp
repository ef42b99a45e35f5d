// The client lifetime rules of the seeds (000, 001): things freed in any
// order, loading again after unloading, many threads on one endpoint, and a
// worker process killed mid-compute. After each, no connection is left open.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "child_worker.h"
#include "client/connection.h"
#include "rpc_client_fixture.h"
#include "weft/core/error.h"

extern char** environ;

namespace weft {
namespace {

using rpc_test::LocalWorker;
using rpc_test::SiluMatmul;
using Clock = std::chrono::steady_clock;
using rpc_test::ChildWorker;
using rpc_test::self_path;

TEST(RpcClientLifetime, BackendFreedBeforeItsBuffers) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto backend = devices[0]->create_backend();
  SiluMatmul m(64, 32, 3);
  auto buf = m.allocate(devices[0]->default_buffer_type());
  backend->compute(m.g);
  backend->synchronize();
  backend.reset();
  EXPECT_EQ(rpc_open_connections(), 1);  // the buffer holds it
  EXPECT_TRUE(m.correct());
  m.x_data = rpc_test::pattern(m.x_data.size(), 0.3f, 2.0f);
  tensor_set(*m.x, m.x_data.data(), 0, m.x->nbytes());

  auto again = devices[0]->create_backend();  // the same connection
  EXPECT_EQ(rpc_open_connections(), 1);
  again->compute(m.g);
  again->synchronize();
  EXPECT_TRUE(m.correct());
  buf.reset();
  EXPECT_EQ(rpc_open_connections(), 1);  // the backend holds it
  again.reset();
  EXPECT_EQ(rpc_open_connections(), 0);
  EXPECT_EQ(rpc_stats(w.endpoint).round_trips, 0u);
}

TEST(RpcClientLifetime, LoadUnloadLoadAHundredTimes) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  for (int i = 0; i < 100; ++i) {
    if (i % 25 == 24) devices = make_rpc_devices(w.endpoint);  // devices made again too
    auto backend = devices[0]->create_backend();
    SiluMatmul m(64, 32, 2, static_cast<float>(i));
    auto weights = m.allocate(devices[0]->default_buffer_type());
    backend->compute(m.g);
    backend->synchronize();
    ASSERT_TRUE(m.correct()) << "load " << i;
    if (i % 2 == 0) {
      backend.reset();
      weights.reset();
    } else {
      weights.reset();
      backend.reset();
    }
    ASSERT_EQ(rpc_open_connections(), 0) << "after unload " << i;
  }
}

TEST(RpcClientLifetime, EightThreadsShareOneEndpoint) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  Device& dev = *devices[0];
  std::atomic<int> wrong{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 12; ++i) {
          auto backend = dev.create_backend();
          SiluMatmul m(64, 32, 4, static_cast<float>(t * 100 + i));
          auto buf = m.allocate(dev.default_buffer_type());
          std::unique_ptr<Buffer> extra = dev.default_buffer_type().allocate(4096);
          if (t % 2 == 0) extra.reset();
          backend->compute(m.g);
          if (i % 3 == 0) {
            auto ev = dev.create_event();
            if (ev) {
              backend->record_event(*ev);
              ev->synchronize();
            }
          }
          backend->synchronize();
          if (!m.correct()) ++wrong;
          if ((t + i) % 2 == 0) {
            backend.reset();
            buf.reset();
          } else {
            buf.reset();
            backend.reset();
          }
          if (i % 4 == 3) (void)make_rpc_devices(w.endpoint);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(rpc_open_connections(), 0);
}

// Starts a worker process serving one CPU thread (slow on purpose: the
// graph must outlast the kill).
void start_worker_process(ChildWorker& child, std::string* how) {
  const std::string self = self_path();
  const std::string weft = self.substr(0, self.rfind('/')) + "/../tools/weft/weft";
  if (::access(weft.c_str(), X_OK) == 0 && child.start({weft, "worker", "--port", "0", "--threads", "1"}, "")) {
    *how = "weft worker";
    return;
  }
  ASSERT_TRUE(
      child.start({self, "--gtest_filter=RpcClientLifetime.DISABLED_ChildWorker", "--gtest_also_run_disabled_tests"},
                  "WEFT_RPC_CHILD=1"))
      << "the child worker did not report its port";
  *how = "child test process";
}

TEST(RpcClientLifetime, DISABLED_ChildWorker) {
  if (std::getenv("WEFT_RPC_CHILD") == nullptr) GTEST_SKIP() << "run by WorkerKilledDuringCompute only";
  auto cpu = make_cpu_device(1);
  rpc::WorkerOptions o;
  o.log = false;
  rpc::Worker worker({cpu.get()}, o);
  worker.start();
  std::printf("\nchild worker listening on 127.0.0.1:%u\n", static_cast<unsigned>(worker.port()));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(120));  // killed long before
  std::_Exit(0);
}

TEST(RpcClientLifetime, WorkerKilledDuringCompute) {
  ChildWorker child;
  std::string how;
  start_worker_process(child, &how);
  if (HasFatalFailure()) return;
  std::printf("worker process: %s at %s\n", how.c_str(), child.endpoint().c_str());
  SCOPED_TRACE(how);
  auto devices = make_rpc_devices(child.endpoint());
  auto backend = devices[0]->create_backend();
  // About 120 GFLOP on one worker thread: seconds, even unsanitized.
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::f32, {1024, 1024});
  Tensor* y = ctx.new_tensor(DType::f32, {1024, 512});
  for (int i = 0; i < 4; ++i) y = ops::mul_mat(ctx, w, y);
  Graph g;
  g.expand(y);
  std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  auto buf = allocate_tensors(devices[0]->default_buffer_type(), all);
  buf->clear(0);
  for (int i = 0; i < 30; ++i) backend->compute(g);

  std::atomic<int64_t> killed_at{0};
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    killed_at = Clock::now().time_since_epoch().count();
    child.kill();
  });
  ErrorKind kind = ErrorKind::internal;
  std::string message;
  bool threw = false;
  try {
    backend->synchronize();
  } catch (const Error& e) {
    threw = true;
    kind = e.kind();
    message = e.what();
  }
  const auto failed_at = Clock::now();
  killer.join();
  ASSERT_TRUE(threw) << "synchronize returned before the worker was killed";
  std::printf("after the kill: %s\n", message.c_str());
  EXPECT_EQ(kind, ErrorKind::disconnected) << message;
  EXPECT_NE(message.find(child.endpoint()), std::string::npos) << message;
  EXPECT_NE(message.find("SYNCHRONIZE"), std::string::npos) << message;
  const auto since_kill = failed_at - Clock::time_point(Clock::duration(killed_at.load()));
  EXPECT_LT(since_kill, std::chrono::seconds(5));

  // Every later use fails fast, with the same kind; freeing never throws.
  const auto t0 = Clock::now();
  EXPECT_THROW(backend->compute(g), Error);
  std::vector<float> out(16);
  try {
    tensor_get(*y, out.data(), 0, sizeof(float) * out.size());
    ADD_FAILURE() << "a read from a dead worker returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::disconnected);
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  buf.reset();
  backend.reset();
  EXPECT_EQ(rpc_open_connections(), 0);
  EXPECT_THROW(devices[0]->create_backend(), Error);  // nobody listens there now

  // A new worker works.
  LocalWorker fresh;
  auto others = make_rpc_devices(fresh.endpoint);
  auto b2 = others[0]->create_backend();
  SiluMatmul m(64, 32, 2);
  auto buf2 = m.allocate(others[0]->default_buffer_type());
  b2->compute(m.g);
  b2->synchronize();
  EXPECT_TRUE(m.correct());
}

}  // namespace
}  // namespace weft
