// The worker's budgets and deadlines (docs/security.md), each against the
// attack of issue 9 that it stops: kernel scratch and stored graphs inside
// the memory budget, a graph cost limit, computes cancelled when their client
// leaves, handshake/idle/write deadlines, and slots that idle or slow
// connections cannot hold against a valid client.
#include <gtest/gtest.h>
#include <malloc.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "protocol/graph_codec.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

using namespace std::chrono_literals;

WorkerOptions limited(size_t budget = SIZE_MAX) {
  WorkerOptions o;
  o.log = std::getenv("WEFT_WORKER_TEST_LOG") != nullptr;
  o.memory_budget = budget;
  return o;
}

// After a refused compute: the next reply is the deferred ERROR of this
// kind mentioning `what`, and the session still answers.
void expect_deferred(Conn& c, ErrorKind kind, const std::string& what) {
  c.send(Cmd::ping, Bytes{});
  const Frame f = c.recv();
  ASSERT_TRUE(f.is_error()) << "the compute was not refused";
  EXPECT_EQ(f.error_kind(), kind) << f.error_message();
  EXPECT_NE(f.error_message().find(what), std::string::npos) << f.error_message();
  c.ping();
}

// top_k over a zero-stride view of 2^n elements of one float: scratch of
// 8 bytes per element on each thread.
struct TopKOfAlias {
  explicit TopKOfAlias(int log2_n) {
    one = ctx.new_tensor(DType::f32, {16});
    const int64_t ne[] = {int64_t{1} << log2_n};
    const size_t nb[] = {0};
    out = ops::top_k(ctx, ops::view(ctx, one, ne, nb, 0), 1);
    g.expand(out);
  }
  Context ctx;
  Graph g;
  Tensor *one, *out;
};

TEST(WorkerLimits, KernelScratchOutsideTheBudgetIsRefusedAndTheSessionStays) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, limited(size_t{4} << 20));
  worker.start();
  Conn c(worker.port());
  c.handshake();
  TopKOfAlias big(22);  // 32 MiB of scratch: the attack took 2 GiB with 2^28
  const Placement pb(big.g);
  const uint64_t h = c.alloc(0, pb.bytes);
  const Bytes encoded = pb.encode(big.g, h);
  c.compute(0, 1, &encoded);
  expect_deferred(c, ErrorKind::out_of_memory, "scratch");
  EXPECT_LE(worker.memory_in_use(), size_t{4} << 20);

  TopKOfAlias small(10);  // 8 KiB of scratch fits
  const Placement ps(small.g);
  const uint64_t h2 = c.alloc(0, ps.bytes);
  const Bytes ok = ps.encode(small.g, h2);
  c.compute(0, 2, &ok);
  const Bytes idx = c.get(h2, ps.offsets.at(small.out), 4);
  ASSERT_EQ(idx.size(), 4u);
  EXPECT_EQ(idx[0] | idx[1] | idx[2] | idx[3], 0);  // all equal: the first index
  c.close();
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0 && worker.memory_in_use() == 0; }));
}

// Many tensors, no data: a chain of scale nodes over an empty tensor.
struct EmptyChain {
  explicit EmptyChain(int n) {
    Tensor* t = ctx.new_tensor(DType::f32, {0});
    for (int i = 0; i < n; ++i) t = ops::scale(ctx, t, 1.0f);
    g.expand(t);
  }
  Context ctx;
  Graph g;
};

TEST(WorkerLimits, StoredGraphsAreChargedToTheBudget) {
  auto cpu = make_cpu_device(1);
  constexpr size_t kBudget = size_t{24} << 20;
  Worker worker({cpu.get()}, limited(kBudget));
  worker.start();
  Conn c(worker.port());
  c.handshake();
  const uint64_t h = c.alloc(0, 0);  // the attack's 0-byte buffer
  EmptyChain chain(20000);
  Writer w;
  encode_graph(w, chain.g, [&](const Tensor&) { return RemoteLocation{h, 0}; });
  const Bytes encoded = w.data();
  const size_t before = worker.memory_in_use();
  c.compute(0, 1, &encoded);
  c.ping();
  const size_t one_graph = worker.memory_in_use() - before;
  EXPECT_GE(one_graph + 4096, decoded_graph_bytes(20001));  // the graph itself is counted (less a small payload)
  int stored = 1;
  bool refused = false;
  for (uint64_t id = 2; id < 64 && !refused; ++id) {
    c.compute(0, id, &encoded);
    c.send(Cmd::ping, Bytes{});
    const Frame f = c.recv();
    if (f.is_error()) {
      EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory) << f.error_message();
      refused = true;
    } else {
      ++stored;
    }
    EXPECT_LE(worker.memory_in_use(), kBudget);
  }
  EXPECT_TRUE(refused) << stored << " graphs of 20001 tensors stored in a budget of " << kBudget;
  c.ping();                      // the session stays
  c.compute(0, 1, nullptr);      // and its stored graphs still run
  c.ping();
  c.close();
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0 && worker.memory_in_use() == 0; }));
}

// The charge a worker makes before decoding covers the heap a decode takes
// (glibc's counters; sanitizers replace malloc, so there it is skipped).
TEST(WorkerLimits, DecodedGraphChargeCoversItsHeap) {
  auto cpu = make_cpu_device(1);
  auto buffer = cpu->default_buffer_type().allocate(64);
  EmptyChain chain(50000);
  Writer w;
  encode_graph(w, chain.g, [&](const Tensor&) { return RemoteLocation{1, 0}; });
  Reader r(w.data(), "graph");
  const size_t before = mallinfo2().uordblks;
  auto decoded = decode_graph(
      r, [&](uint64_t) { return buffer.get(); }, [](const Tensor&) { return true; });
  const size_t after = mallinfo2().uordblks;
  if (after <= before) GTEST_SKIP() << "malloc statistics unavailable (sanitizer build)";
  EXPECT_EQ(decoded->ctx.size(), 50001u);
  EXPECT_LE(after - before, decoded_graph_bytes(decoded->ctx.size()))
      << "a decoded graph takes more heap than the worker charges for it";
  EXPECT_GE(max_graph_tensors_in(w.data().size()), decoded->ctx.size());
}

// weight rows that alias one row (nb1 = 0): 4096 x 2^20 x n multiply-adds.
struct AliasedMatMul {
  explicit AliasedMatMul(int64_t n) {
    row = ctx.new_tensor(DType::f32, {4096});
    const int64_t ne[] = {4096, 1 << 20};
    const size_t nb[] = {4, 0};
    x = ctx.new_tensor(DType::f32, {4096, n});
    g.expand(ops::mul_mat(ctx, ops::view(ctx, row, ne, nb, 0), x));
  }
  Context ctx;
  Graph g;
  Tensor *row, *x;
};

TEST(WorkerLimits, AGraphOverTheCostLimitIsRefused) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.max_graph_cost = uint64_t{1} << 32;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn c(worker.port());
  c.handshake();
  AliasedMatMul mm(64);  // 2.75e11 multiply-adds, the attack's size
  const Placement p(mm.g);
  const uint64_t h = c.alloc(0, p.bytes);
  const Bytes encoded = p.encode(mm.g, h);
  c.compute(0, 1, &encoded);
  expect_deferred(c, ErrorKind::out_of_memory, "costs");
  GoodClient good(worker.port(), 0, 5);  // real work still runs
  good.round();
}

// This process's CPU time: the worker runs in it, and nothing else here
// computes, so its growth shows the compute running (no sleep assumes it).
std::chrono::duration<double> process_cpu_time() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

TEST(WorkerLimits, AComputeStopsWhenItsClientDisconnects) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, limited());
  worker.start();
  {
    Conn c(worker.port());
    c.handshake();
    AliasedMatMul mm(256);  // ~1.1e12 multiply-adds: many minutes on one thread
    const Placement p(mm.g);
    const uint64_t h = c.alloc(0, p.bytes);
    const Bytes encoded = p.encode(mm.g, h);
    const auto before = process_cpu_time();
    c.compute(0, 1, &encoded);
    // It is running once the process has spent a quarter second more of CPU.
    ASSERT_TRUE(eventually([&] { return process_cpu_time() - before > 250ms; })) << "the compute never started";
  }  // gone
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0; })) << "the compute kept running";
  // And it stopped: the process's CPU time stands still (a kernel left
  // running would add about a second per second).
  const auto idle = process_cpu_time();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(process_cpu_time() - idle, 150ms) << "a kernel kept running after its session ended";
  GoodClient good(worker.port(), 0, 6);
  good.round();
}

// Bounded by bytes, not by the clock: the slow client dribbles a whole valid
// HELLO frame a byte every 50 ms (1.2 s and more), and the 300 ms deadline
// must close it before the frame is complete (a worker without the deadline
// would answer the HELLO). A loaded machine only stretches the pauses.
TEST(WorkerLimits, HandshakeDeadlineClosesSilentAndSlowConnections) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.handshake_timeout = 300ms;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn silent(worker.port());
  Conn slow(worker.port());
  Bytes frame(kFrameHeaderBytes);
  {
    const Bytes hello = hello_payload();
    FrameHeader fh;
    fh.length = static_cast<uint32_t>(hello.size());
    fh.command = static_cast<uint16_t>(Cmd::hello);
    encode_header(fh, frame.data());
    frame.insert(frame.end(), hello.begin(), hello.end());
  }
  ASSERT_GE(frame.size(), 24u);
  std::atomic<bool> stop{false};
  std::atomic<size_t> sent{0};
  std::thread dribble([&] {
    try {
      for (; sent < frame.size() && !stop; ++sent) {
        slow.raw(frame.data() + sent, 1);
        std::this_thread::sleep_for(50ms);
      }
    } catch (const Error&) {
    }
  });
  EXPECT_TRUE(silent.closed_by_peer());
  EXPECT_TRUE(slow.closed_by_peer()) << "the slow client's HELLO was answered after " << sent << " bytes";
  EXPECT_LT(sent.load(), frame.size()) << "the slow client finished its HELLO before the deadline closed it";
  stop = true;
  dribble.join();
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0; }));
}

TEST(WorkerLimits, AnIdleSessionIsClosed) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.idle_timeout = 300ms;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn c(worker.port());
  c.handshake();
  c.alloc(0, 1 << 20);
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0 && worker.memory_in_use() == 0; }));
}

TEST(WorkerLimits, AClientThatStopsReadingIsCut) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.io_timeout = 200ms;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn c(worker.port());
  c.handshake();
  const uint64_t h = c.alloc(0, 1 << 20);
  Writer w;  // 200 reads of 1 MiB, none of whose replies is read
  for (int i = 0; i < 200; ++i) {
    Writer r;
    r.u64(h);
    r.u64(0);
    r.u64(1 << 20);
    c.send(Cmd::get_tensor, r);
  }
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0; })) << "a reply write blocked forever";
}

// The scenario: 70 connections that never finish their handshake
// (35 silent, 35 sending one byte at a time) while a valid client arrives.
TEST(WorkerLimits, AValidClientIsServedWhileSlowAndIdleClientsHoldConnections) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.handshake_timeout = 4s;
  Worker worker({cpu.get()}, o);  // max_clients: the default 64
  worker.start();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Conn>> idle, slow;
  for (int i = 0; i < 35; ++i) idle.push_back(std::make_unique<Conn>(worker.port()));
  for (int i = 0; i < 35; ++i) slow.push_back(std::make_unique<Conn>(worker.port()));
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    const uint8_t byte = 0x01;
    while (!stop) {
      for (auto& c : slow) {
        try {
          c->raw(&byte, 1);
        } catch (const Error&) {
        }
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  // The worker has taken all 70 once it dropped the 6 oldest (64 may wait
  // for their handshake): an event, not a guessed pause.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(idle[static_cast<size_t>(i)]->closed_by_peer()) << "idle connection " << i;
  for (int round = 0; round < 3; ++round) {
    GoodClient good(worker.port(), 0, 10 + static_cast<uint64_t>(round));
    good.round();
    good.round();
  }
  // Served while they held their connections: before the first handshake
  // deadline could have freed a place (a worker that locks new clients out
  // until the slow ones time out serves them only after 4 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "the valid client waited for the slow ones' deadlines";
  stop = true;
  dribble.join();
}

TEST(WorkerLimits, AnIdleSessionHoldingNothingGivesItsPlaceUp) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.max_clients = 2;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn a(worker.port()), b(worker.port());
  a.handshake();
  b.handshake();
  b.alloc(0, 64);  // b holds state: never evicted for being idle
  std::this_thread::sleep_for(1200ms);
  Conn c(worker.port());
  c.handshake();  // admitted: a (idle, holding nothing) made room
  c.ping();
  EXPECT_TRUE(a.closed_by_peer());
  b.ping();
}

// A host that keeps its session between uses: the client's keepalive PING
// holds it open across the worker's idle timeout; without it the session ends.
TEST(WorkerLimits, TheClientKeepaliveHoldsAnIdleSessionOpen) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = limited();
  o.limits.idle_timeout = 400ms;
  Worker worker({cpu.get()}, o);
  worker.start();
  const std::string endpoint = "127.0.0.1:" + std::to_string(worker.port());
  for (const bool keepalive : {true, false}) {
    SCOPED_TRACE(keepalive ? "with keepalive" : "without keepalive");
    RpcOptions ro;
    ro.keepalive = keepalive ? 100ms : 0ms;
    auto devices = make_rpc_devices(endpoint, ro);
    auto buffer = devices[0]->default_buffer_type().allocate(64);
    Tensor t;
    t.ne[0] = 16;
    set_packed_strides(t);
    t.buffer = buffer.get();
    t.data = buffer->base();
    if (keepalive) {
      std::this_thread::sleep_for(1200ms);  // three idle timeouts: only the pings hold it
    } else {  // the event itself, not a guessed wait: the worker ends the session
      ASSERT_TRUE(eventually([&] { return worker.active_sessions() == 0; })) << "the idle session was not closed";
    }
    const float x = 7.0f;
    float y = 0.0f;
    if (keepalive) {
      buffer->set_tensor(t, &x, 8, 4);
      buffer->get_tensor(t, &y, 8, 4);
      EXPECT_EQ(y, 7.0f);
    } else {
      try {
        buffer->set_tensor(t, &x, 8, 4);
        buffer->get_tensor(t, &y, 8, 4);
        ADD_FAILURE() << "the idle session was not closed";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::disconnected) << e.what();
      }
    }
    buffer.reset();
    devices.clear();
    EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0; }));
  }
}

}  // namespace
}  // namespace weft::rpc::wtest
