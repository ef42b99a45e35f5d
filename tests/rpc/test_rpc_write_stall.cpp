// Writes to a worker that stopped reading are bounded too
// (Stream::set_write_stall_bound, docs/recovery.md "Detection"): a stopped
// `weft worker` process (SIGSTOP) whose socket buffers fill fails a large
// upload after about the silence bound, naming the stall, instead of
// blocking the host. Under load the keepalive's PING (sent after a second
// idle, before the upload starts) may hit the silence bound first: that
// failure names the stop too and comes as soon, so either is the contract.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "child_worker.h"
#include "client/connection.h"
#include "protocol/messages.h"
#include "rpc_client_fixture.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"

namespace weft::rpc_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// More than the socket buffers on both ends hold (4 MiB each, and
// loopback's queue): the write must wait for the worker to read.
constexpr size_t kWriteStallBytes = size_t{48} << 20;

char write_stall_process_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

// One SET_TENSOR of kWriteStallBytes into a fresh buffer: sent, no reply
// awaited, so only the write can wait. "" when it went out, else the error.
std::string write_stall_upload(rpc::Connection& connection, uint64_t handle, const std::vector<uint8_t>& bytes) {
  try {
    rpc::Writer head;
    rpc::SetTensorRequest{handle, 0, bytes.size(), {}}.encode_head(head);
    connection.send(rpc::Cmd::set_tensor, head, bytes.data(), bytes.size());
    return "";
  } catch (const Error& e) {
    return std::string(e.kind() == ErrorKind::disconnected ? "disconnected: " : "other: ") + e.what();
  }
}

TEST(RpcWriteStall, AnUploadToAStoppedWorkerFailsWithinTheBound) {
  const std::string weft = weft_binary();
  if (weft.empty()) GTEST_SKIP() << "needs the weft binary of this build tree (tools/weft/weft)";
  ChildWorker child;
  ASSERT_TRUE(child.start({weft, "worker", "--port", "0", "--threads", "1"}, "")) << "the worker did not start";
  auto connection = rpc::get_connection(child.endpoint(), RpcOptions{});
  ASSERT_TRUE(connection && connection->has(rpc::kCapHeartbeat));
  const std::vector<uint8_t> bytes(kWriteStallBytes, 7);
  // The last byte from the worker comes after this: no bound can end sooner.
  const auto before_last_reply = Clock::now();
  const uint64_t handle = connection->call(rpc::AllocBufferRequest{0, kWriteStallBytes}).handle;
  ASSERT_NE(handle, 0u);
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  for (int i = 0; i < 500 && write_stall_process_state(child.pid()) != 'T'; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(write_stall_process_state(child.pid()), 'T') << "the worker did not stop";
  const auto t0 = Clock::now();
  auto outcome = std::async(std::launch::async, [&] { return write_stall_upload(*connection, handle, bytes); });
  const bool done = outcome.wait_for(15s) == std::future_status::ready;
  const auto failed_at = Clock::now();
  ::kill(child.pid(), SIGCONT);
  if (!done) {
    child.kill();  // its socket closes: the blocked write ends
    outcome.wait();
    FAIL() << "a write to a stopped worker still waited after 15 s";
  }
  const std::string what = outcome.get();
  EXPECT_EQ(what.rfind("disconnected: ", 0), 0u) << what;
  const bool stalled = what.find("stalled") != std::string::npos;
  const bool silent = what.find("no reply and no heartbeat") != std::string::npos;
  EXPECT_TRUE(stalled || silent) << what;
  EXPECT_NE(what.find(child.endpoint()), std::string::npos) << what;
  EXPECT_GE(failed_at - before_last_reply, rpc::Connection::kMinSilence - 50ms);
  EXPECT_LT(failed_at - t0, rpc::Connection::kMinSilence + 1500ms);
  EXPECT_TRUE(connection->broken());
}

}  // namespace
}  // namespace weft::rpc_test
