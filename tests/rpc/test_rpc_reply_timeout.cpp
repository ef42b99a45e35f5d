// RpcOptions::reply_timeout: a worker that stays silent past the deadline
// while the client waits for a reply is taken as dead; without a deadline
// the same slow compute completes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "rpc_client_fixture.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace weft::rpc_test {
namespace {

using namespace std::chrono_literals;

// A worker whose only device sleeps 1.5 s before each compute: a stand-in
// for a stalled process that still answers TCP.
LocalWorker slow_worker() {
  AsyncOptions ao;
  ao.delay_ms = 1500;
  return LocalWorker(make_async_device(ao));
}

TEST(RpcReplyTimeout, SilentWorkerPastTheDeadlineIsDisconnected) {
  LocalWorker w = slow_worker();
  RpcOptions options;
  options.reply_timeout = 200ms;
  auto devices = make_rpc_devices(w.endpoint, options);
  auto backend = devices.at(0)->create_backend();
  SiluMatmul graph(64, 32, 2);
  auto buf = graph.allocate(devices[0]->default_buffer_type());
  backend->compute(graph.g);
  try {
    backend->synchronize();
    FAIL() << "synchronize returned although the worker was silent for longer than the deadline";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::disconnected) << e.what();
    EXPECT_NE(std::string(e.what()).find(w.endpoint), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no data for 200 ms"), std::string::npos) << e.what();
  }
  // The connection is spent: later calls fail at once, naming it.
  EXPECT_THROW(graph.result(), Error);
}

TEST(RpcReplyTimeout, WithoutADeadlineASlowComputeCompletes) {
  LocalWorker w = slow_worker();
  auto devices = make_rpc_devices(w.endpoint);
  auto backend = devices.at(0)->create_backend();
  SiluMatmul graph(64, 32, 2);
  auto buf = graph.allocate(devices[0]->default_buffer_type());
  backend->compute(graph.g);
  backend->synchronize();
  EXPECT_TRUE(graph.correct());
}

}  // namespace
}  // namespace weft::rpc_test
