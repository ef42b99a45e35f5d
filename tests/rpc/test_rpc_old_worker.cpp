// A client of today against a protocol 1.4 worker (docs/protocol.md's
// version rules): what 1.5 to 1.7 added -- peer links (1.5), COMPUTE_STATS
// (1.6), op routed_rows and SET/GET_TENSOR_ROWS (1.7) -- must never reach it,
// and what it can do must still work. A proxy stands between the client and a
// real worker and makes the conversation a 1.4 one: the client's HELLO and
// the worker's reply say minor 4 with 1.4's capabilities, and a command a
// 1.4 worker does not know ends the connection, as such a worker would,
// after it is recorded. Each check runs against the worker directly too,
// where the newer command must appear: so the check can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "protocol/wire.h"
#include "rpc_client_fixture.h"
#include "transport/stream.h"
#include "weft/backend/alloc.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

using rpc_test::LocalWorker;
using rpc_test::SiluMatmul;

constexpr uint16_t kOldMinor = 4;
constexpr uint64_t kOldCaps = rpc::kCapTensorCache | rpc::kCapEvents | rpc::kCapOpSupport;

// The commands protocol 1.4 did not have.
bool old_worker_knows(uint16_t command) {
  using rpc::Cmd;
  for (Cmd c : {Cmd::set_tensor_rows, Cmd::get_tensor_rows, Cmd::compute_stats, Cmd::peer_ticket,
                Cmd::peer_connect, Cmd::peer_attach, Cmd::peer_push, Cmd::push_to_peer, Cmd::peer_wait}) {
    if (command == static_cast<uint16_t>(c)) return false;
  }
  return true;
}

// Listens on loopback; each connection is relayed to the worker at
// `target`, frame by frame: with `as_old`, the HELLO exchange rewritten to
// 1.4 and the connection ended at a command 1.4 lacks; else unchanged (the
// control: the same path, today's protocol).
class OldWorkerProxy {
 public:
  OldWorkerProxy(uint16_t target, bool as_old)
      : as_old_(as_old), target_(target), listener_(rpc::tcp_listen("127.0.0.1", 0)) {
    endpoint = "127.0.0.1:" + std::to_string(listener_->port());
    accept_thread_ = std::thread([this] {
      while (auto client = listener_->accept()) {
        std::lock_guard lock(mu_);
        auto& link = links_.emplace_back(std::make_unique<Link>());
        link->client = std::move(client);
        link->worker = rpc::tcp_connect("127.0.0.1", target_);
        link->up = std::thread([this, l = link.get()] { relay(*l->client, *l->worker, true); });
        link->down = std::thread([this, l = link.get()] { relay(*l->worker, *l->client, false); });
      }
    });
  }
  ~OldWorkerProxy() {
    listener_->close();
    accept_thread_.join();
    for (auto& l : links_) {
      l->client->shutdown();
      l->worker->shutdown();
      l->up.join();
      l->down.join();
    }
  }
  // Commands the client sent (request codes), in order.
  std::vector<uint16_t> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  bool client_sent(rpc::Cmd c) {
    const std::vector<uint16_t> s = sent();
    return std::find(s.begin(), s.end(), static_cast<uint16_t>(c)) != s.end();
  }
  std::string endpoint;

 private:
  struct Link {
    std::unique_ptr<rpc::Stream> client, worker;
    std::thread up, down;
  };
  // Copies frames from `from` to `to` until either end closes.
  void relay(rpc::Stream& from, rpc::Stream& to, bool from_client) {
    try {
      for (;;) {
        uint8_t raw[rpc::kFrameHeaderBytes];
        from.read_exact(raw, sizeof raw);
        rpc::FrameHeader h = rpc::decode_header(raw);
        std::vector<uint8_t> payload(h.length);
        if (h.length > 0) from.read_exact(payload.data(), h.length);
        if (from_client) {
          std::lock_guard lock(mu_);
          sent_.push_back(h.command);
          if (as_old_ && !old_worker_knows(h.command)) break;  // a 1.4 worker ends the connection
        }
        const bool hello = h.command == static_cast<uint16_t>(rpc::Cmd::hello) ||
                           h.command == (static_cast<uint16_t>(rpc::Cmd::hello) | rpc::kReplyBit);
        if (as_old_ && hello) {
          payload = as_old_hello(payload, from_client);
          h.length = static_cast<uint32_t>(payload.size());
        }
        rpc::encode_header(h, raw);
        to.write_all(raw, sizeof raw, payload.data(), payload.size());
      }
    } catch (const Error&) {
    }
    from.shutdown();
    to.shutdown();
  }
  static std::vector<uint8_t> as_old_hello(const std::vector<uint8_t>& payload, bool request) {
    rpc::Reader r(payload, "HELLO");
    rpc::Writer w;
    if (request) {
      rpc::HelloRequest m = rpc::HelloRequest::decode(r);
      m.minor = kOldMinor;
      m.capabilities &= kOldCaps;
      m.encode(w);
    } else {
      rpc::HelloReply m = rpc::HelloReply::decode(r);
      m.minor = kOldMinor;
      m.capabilities &= kOldCaps;
      m.encode(w);
    }
    return w.data();
  }

  const bool as_old_;
  const uint16_t target_;
  std::unique_ptr<rpc::Listener> listener_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<uint16_t> sent_;
  std::thread accept_thread_;
};

uint16_t port_of(const LocalWorker& w) { return w.worker->port(); }

// The proxy relays a whole conversation: a graph computes over it.
TEST(RpcOldWorker, AGraphComputesOverAVersion14Conversation) {
  LocalWorker w;
  OldWorkerProxy old(port_of(w), true);
  auto devices = make_rpc_devices(old.endpoint);
  ASSERT_EQ(devices.size(), 1u);
  SiluMatmul mm(64, 16, 3);
  auto buf = mm.allocate(devices[0]->default_buffer_type());
  devices[0]->create_backend()->compute(mm.g);
  EXPECT_TRUE(mm.correct());
  EXPECT_TRUE(old.client_sent(rpc::Cmd::graph_compute));
  for (uint16_t c : old.sent()) EXPECT_TRUE(old_worker_knows(c)) << "command " << c;
}

// 1.7: a tensor flagged kFlagSparseRows, copied from the host and read
// back, travels whole (SET_TENSOR and GET_TENSOR) and arrives whole; to
// today's worker it goes as rows.
TEST(RpcOldWorker, SparseRowsTravelWhole) {
  LocalWorker w;
  OldWorkerProxy old(port_of(w), true), today(port_of(w), false);
  auto local = make_cpu_device(1);
  for (OldWorkerProxy* proxy : {&old, &today}) {
    auto devices = make_rpc_devices(proxy->endpoint);
    Context ctx;
    Tensor* host = ctx.new_tensor(DType::f32, {64, 12});
    Tensor* remote = ctx.new_tensor(DType::f32, {64, 12});
    host->flags |= kFlagSparseRows;
    remote->flags |= kFlagSparseRows;
    std::vector<Tensor*> h{host}, r{remote};
    auto host_buf = allocate_tensors(local->default_buffer_type(), h);
    auto remote_buf = allocate_tensors(devices[0]->default_buffer_type(), r);
    std::vector<float> data(64 * 12, 0.0f);
    for (size_t i = 0; i < 64; ++i) data[5 * 64 + i] = 0.5f + static_cast<float>(i);  // one row of 12
    tensor_set(*host, data.data(), 0, host->nbytes());
    ASSERT_TRUE(remote_buf->copy_tensor(*host, *remote));
    std::vector<float> back(data.size(), -1.0f);
    tensor_get(*remote, back.data(), 0, remote->nbytes());
    EXPECT_EQ(back, data);
  }
  EXPECT_TRUE(old.client_sent(rpc::Cmd::set_tensor));
  EXPECT_TRUE(old.client_sent(rpc::Cmd::get_tensor));
  EXPECT_FALSE(old.client_sent(rpc::Cmd::set_tensor_rows));
  EXPECT_FALSE(old.client_sent(rpc::Cmd::get_tensor_rows));
  EXPECT_TRUE(today.client_sent(rpc::Cmd::set_tensor_rows));
  EXPECT_TRUE(today.client_sent(rpc::Cmd::get_tensor_rows));
}

// 1.6: no COMPUTE_STATS for a 1.4 worker (the host counts nothing for it);
// today's worker answers it. Each connection is live (a graph computed,
// its buffer held): only the version can keep the question back.
TEST(RpcOldWorker, ComputeStatsAreNotAsked) {
  LocalWorker w;
  OldWorkerProxy old(port_of(w), true), today(port_of(w), false);
  for (OldWorkerProxy* proxy : {&old, &today}) {
    auto devices = make_rpc_devices(proxy->endpoint);
    SiluMatmul mm(32, 8, 2);
    auto buf = mm.allocate(devices[0]->default_buffer_type());
    devices[0]->create_backend()->compute(mm.g);
    ASSERT_TRUE(mm.correct());
    const std::optional<WorkerCompute> stats = rpc_compute_stats(proxy->endpoint, 0);
    if (proxy == &old) {
      EXPECT_EQ(stats, std::nullopt);
    } else {
      ASSERT_NE(stats, std::nullopt);
      EXPECT_EQ(stats->graphs, 1u);
    }
  }
  EXPECT_FALSE(old.client_sent(rpc::Cmd::compute_stats));
  EXPECT_TRUE(today.client_sent(rpc::Cmd::compute_stats));
}

// 1.7: op routed_rows is not offered to a 1.4 worker (SUPPORTS_OP is not
// even asked: the scheduler places it elsewhere); today's worker takes it.
TEST(RpcOldWorker, RoutedRowsIsNotOffered) {
  LocalWorker w;
  OldWorkerProxy old(port_of(w), true), today(port_of(w), false);
  auto old_devices = make_rpc_devices(old.endpoint);
  auto today_devices = make_rpc_devices(today.endpoint);
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {16, 4});
  Tensor* ids = ctx.new_tensor(DType::i32, {2, 4});
  Tensor* routed = ops::routed_rows(ctx, x, ids, 0, 2);
  EXPECT_FALSE(old_devices[0]->supports_op(*routed));
  EXPECT_TRUE(today_devices[0]->supports_op(*routed));
  for (uint16_t c : old.sent()) EXPECT_TRUE(old_worker_knows(c)) << "command " << c;
}

// 1.5: two 1.4 workers get no peer link between them (copies go through
// the host); two of today's do.
TEST(RpcOldWorker, NoPeerLinksBetweenVersion14Workers) {
  LocalWorker a, b;
  OldWorkerProxy old_a(port_of(a), true), old_b(port_of(b), true);
  OldWorkerProxy today_a(port_of(a), false), today_b(port_of(b), false);
  auto oa = make_rpc_devices(old_a.endpoint), ob = make_rpc_devices(old_b.endpoint);
  auto ta = make_rpc_devices(today_a.endpoint), tb = make_rpc_devices(today_b.endpoint);
  auto oa_backend = oa[0]->create_backend(), ob_backend = ob[0]->create_backend();
  auto ta_backend = ta[0]->create_backend(), tb_backend = tb[0]->create_backend();
  EXPECT_FALSE(ob_backend->copies_ordered_from(*oa_backend));
  EXPECT_TRUE(tb_backend->copies_ordered_from(*ta_backend));
  for (OldWorkerProxy* p : {&old_a, &old_b}) {
    for (uint16_t c : p->sent()) EXPECT_TRUE(old_worker_knows(c)) << "command " << c;
  }
}

}  // namespace
}  // namespace weft
