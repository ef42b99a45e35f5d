// The worker with well-behaved clients: many at once, lifetimes (what a
// session owns is freed when it ends), limits that keep sessions open, the
// tensor cache across connections, non-host devices, events, auth.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/tensor_cache.h"
#include "server/worker_testing.h"
#include "temp_dir.h"
#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"
#include "weft/testing/async.h"
#include "worker_wire.h"

namespace weft::rpc::wtest {
namespace {

namespace fs = std::filesystem;

WorkerOptions quiet() {
  WorkerOptions o;
  o.log = false;
  return o;
}

// A unique, empty directory removed at the end of the test.
using weft::test::TempDir;

TEST(WorkerSessions, SixteenConcurrentClientsGetTheirOwnResults) {
  auto cpu = make_cpu_device(2);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  auto local = make_cpu_device(1);
  auto local_backend = local->create_backend();
  std::mutex local_mutex;  // one local backend checks everyone's results

  constexpr int kClients = 16;
  std::vector<std::thread> threads;
  std::atomic<int> checked{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(1000u + static_cast<uint32_t>(c));
      const int64_t k = 16 + 16 * (c % 4), m = 3 + c % 5, n = 1 + c % 3;
      TestGraph graph(k, m, n);
      Conn conn(worker.port());
      conn.handshake();
      const uint64_t h = conn.alloc(0, graph.bytes);
      // The same graph computed locally, as the reference.
      TestGraph mine(k, m, n);
      std::vector<Tensor*> all(mine.g.leafs().begin(), mine.g.leafs().end());
      all.insert(all.end(), mine.g.nodes().begin(), mine.g.nodes().end());
      auto local_buf = allocate_tensors(local->default_buffer_type(), all);
      for (int round = 0; round < 3; ++round) {
        const auto a = random_floats(rng, static_cast<size_t>(k * m));
        const auto b = random_floats(rng, static_cast<size_t>(k * n));
        const auto bias = random_floats(rng, static_cast<size_t>(m));
        conn.set(h, graph.offsets.at(graph.a), a.data(), a.size() * 4);
        conn.set(h, graph.offsets.at(graph.b), b.data(), b.size() * 4);
        conn.set(h, graph.offsets.at(graph.bias), bias.data(), bias.size() * 4);
        if (round == 0) {
          const Bytes encoded = graph.encode(h);
          conn.compute(0, 42, &encoded);  // every client uses id 42: ids are per session
        } else {
          conn.compute(0, 42, nullptr);
        }
        const auto got = as_floats(conn.get(h, graph.offsets.at(graph.y), graph.y->nbytes()));
        std::vector<float> want(got.size());
        {
          std::lock_guard lock(local_mutex);
          tensor_set(*mine.a, a.data(), 0, a.size() * 4);
          tensor_set(*mine.b, b.data(), 0, b.size() * 4);
          tensor_set(*mine.bias, bias.data(), 0, bias.size() * 4);
          local_backend->compute(mine.g);
          local_backend->synchronize();
          tensor_get(*mine.y, want.data(), 0, want.size() * 4);
        }
        expect_near_all(got, want);
        expect_near_all(got, graph.expected(a, b, bias));
        checked.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(checked.load(), kClients * 3);
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0 && worker.memory_in_use() == 0; }));
}

TEST(WorkerSessions, DisconnectFreesEverything) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  {
    GoodClient client(worker.port(), 0, 3);
    client.round();
    client.conn().alloc(0, 1 << 20);
    client.conn().alloc(0, 1 << 20);
    EXPECT_EQ(worker.active_sessions(), 1);
    EXPECT_GT(worker.memory_in_use(), size_t{2} << 20);
  }  // disconnects without freeing anything
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 0; }));
  EXPECT_EQ(worker.memory_in_use(), 0u);
}

TEST(WorkerSessions, FreeBufferReturnsBudget) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = quiet();
  o.memory_budget = 1 << 20;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn c(worker.port());
  c.handshake();
  const uint64_t a = c.alloc(0, 600 << 10);
  // The bytes, plus the buffer's bookkeeping and the frames' payload memory.
  EXPECT_GE(worker.memory_in_use(), size_t{600} << 10);
  EXPECT_LT(worker.memory_in_use(), (size_t{600} << 10) + 4096);
  Writer w;
  w.u32(0);
  w.u64(600 << 10);
  c.send(Cmd::alloc_buffer, w);
  const Frame f = c.recv();
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error_kind(), ErrorKind::out_of_memory);
  c.free_buffer(a);
  c.ping();
  EXPECT_LT(worker.memory_in_use(), 4096u);  // only the session's small frame buffer
  EXPECT_NE(c.alloc(0, 600 << 10), 0u);      // fits again
}

TEST(WorkerSessions, StopClosesSessionsAndFrees) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  Conn a(worker.port()), b(worker.port());
  a.handshake();
  b.handshake();
  a.alloc(0, 4096);
  b.alloc(0, 4096);
  worker.stop();
  EXPECT_TRUE(a.closed_by_peer());
  EXPECT_TRUE(b.closed_by_peer());
  EXPECT_EQ(worker.active_sessions(), 0);
  EXPECT_EQ(worker.memory_in_use(), 0u);
  worker.stop();  // idempotent
}

TEST(WorkerSessions, MaxClientsRefusesTheNextOne) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = quiet();
  o.max_clients = 2;
  Worker worker({cpu.get()}, o);
  worker.start();
  Conn a(worker.port()), b(worker.port());
  a.handshake();
  b.handshake();
  {
    Conn c(worker.port());  // both places hold a session (with buffers): turned away at its HELLO
    a.alloc(0, 64);
    b.alloc(0, 64);
    c.send(static_cast<uint16_t>(Cmd::hello), hello_payload());
    expect_fatal(c, ErrorKind::out_of_memory);
  }
  a.close();
  EXPECT_TRUE(eventually([&] { return worker.active_sessions() == 1; }));
  Conn d(worker.port());  // a slot is free again
  d.handshake();
  d.ping();
  b.ping();
}

TEST(WorkerSessions, ServeOverMemoryPipe) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());  // never started: serve() alone
  auto [client_end, server_end] = memory_pipe();
  std::thread server([&, s = server_end.get()] { WorkerTestAccess::serve(worker, *s); });
  {
    Conn c(std::move(client_end));
    c.handshake();
    const uint64_t h = c.alloc(0, 64);
    const uint32_t x = 0xC0FFEE;
    c.set(h, 60, &x, 4);
    const Bytes got = c.get(h, 60, 4);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(std::memcmp(got.data(), &x, 4), 0);
    EXPECT_EQ(worker.active_sessions(), 1);
  }  // the client end goes away: serve() returns
  server.join();
  EXPECT_EQ(worker.active_sessions(), 0);
  EXPECT_EQ(worker.memory_in_use(), 0u);
}

TEST(WorkerSessions, StopEndsServeSessions) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  auto [client_end, server_end] = memory_pipe();
  std::thread server([&, s = server_end.get()] { WorkerTestAccess::serve(worker, *s); });
  Conn c(std::move(client_end));
  c.handshake();
  worker.stop();  // waits for serve() to end
  server.join();
  EXPECT_EQ(worker.active_sessions(), 0);
}

TEST(WorkerSessions, GetDevicesReportsDevicesAndBudget) {
  auto cpu0 = make_cpu_device(1);
  auto cpu1 = make_cpu_device(2);
  WorkerOptions o = quiet();
  o.memory_budget = 1 << 20;
  Worker worker({cpu0.get(), cpu1.get()}, o);
  worker.start();
  Conn c(worker.port());
  const uint64_t caps = c.handshake();
  EXPECT_EQ(caps, uint64_t{kCapEvents | kCapOpSupport});  // no cache directory: no tensor_cache bit
  c.alloc(1, 1 << 18);
  const GetDevicesReply reply = c.call(GetDevicesRequest{});
  ASSERT_EQ(reply.devices.size(), 2u);
  for (const DeviceInfo& d : reply.devices) {
    EXPECT_EQ(d.name, "CPU");
    EXPECT_FALSE(d.description.empty());
    EXPECT_EQ(d.kind, 0);                          // cpu
    EXPECT_LE(d.free, (1u << 20) - (1u << 18));    // what the budget has left: less the buffer
    EXPECT_GT(d.free, (1u << 20) - (1u << 18) - 4096);  // and the session's bookkeeping
    EXPECT_EQ(d.total, 1u << 20);                  // total: the budget
    EXPECT_EQ(d.buffer_type_name, "CPU");
    EXPECT_EQ(d.alignment, 64u);
    EXPECT_GT(d.max_size, 0u);
  }
}

TEST(WorkerSessions, AuthenticatedClientWorks) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = quiet();
  o.auth_secret = "s3cret";
  Worker worker({cpu.get()}, o);
  worker.start();
  GoodClient client(worker.port(), 0, 11, 32, 8, 4, std::string("s3cret"));
  client.round();
  client.round();
}

TEST(WorkerSessions, NonLoopbackNeedsSecretOrInsecure) {
  auto cpu = make_cpu_device(1);
  WorkerOptions o = quiet();
  o.host = "0.0.0.0";
  EXPECT_THROW(Worker({cpu.get()}, o), Error);
  o.host = "::";
  EXPECT_THROW(Worker({cpu.get()}, o), Error);
  o.insecure = true;
  EXPECT_NO_THROW(Worker({cpu.get()}, o));
  o.insecure = false;
  o.auth_secret = "x";
  EXPECT_NO_THROW(Worker({cpu.get()}, o));
  o.auth_secret.reset();
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) {
    o.host = host;
    EXPECT_NO_THROW(Worker({cpu.get()}, o)) << host;
  }
}

TEST(WorkerSessions, StoredGraphsAreCappedLeastRecentlyUsedFirst) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  Conn c(worker.port());
  c.handshake();
  TestGraph graph(16, 4, 2);
  const uint64_t h = c.alloc(0, graph.bytes);
  const Bytes encoded = graph.encode(h);
  for (uint64_t id = 0; id <= kMaxGraphsPerSession; ++id) {
    c.compute(0, id, &encoded);
    if (id == 10) c.compute(0, 0, nullptr);  // graph 0 used again: graph 1 is now the oldest
  }
  c.compute(0, 0, nullptr);
  c.compute(0, kMaxGraphsPerSession, nullptr);
  c.synchronize(0);
  c.compute(0, 1, nullptr);  // dropped when the 65th arrived
  expect_fatal(c);
}

// COMPUTE_STATS (1.6) counts this session's GRAPH_COMPUTEs per device and
// the time they took; another session's are not its own; a bad device ends
// the session like any bad index.
TEST(WorkerSessions, ComputeStatsCountThisSessionsGraphs) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  Conn c(worker.port());
  c.handshake();
  ComputeStatsReply none = c.call(ComputeStatsRequest{0});
  EXPECT_EQ(none.graphs, 0u);
  EXPECT_EQ(none.compute_ns, 0u);
  TestGraph graph(16, 4, 2);
  const uint64_t h = c.alloc(0, graph.bytes);
  const Bytes encoded = graph.encode(h);
  c.compute(0, 0, &encoded);
  for (int i = 0; i < 4; ++i) c.compute(0, 0, nullptr);
  const ComputeStatsReply five = c.call(ComputeStatsRequest{0});  // after the work queued before it
  EXPECT_EQ(five.graphs, 5u);
  EXPECT_GT(five.compute_ns, 0u);
  Conn other(worker.port());
  other.handshake();
  EXPECT_EQ(other.call(ComputeStatsRequest{0}).graphs, 0u);
  c.send(ComputeStatsRequest{1});
  expect_fatal(c);
}

TEST(WorkerSessions, EventsAcrossDevices) {
  auto cpu0 = make_cpu_device(1);
  auto cpu1 = make_cpu_device(1);
  Worker worker({cpu0.get(), cpu1.get()}, quiet());
  worker.start();
  Conn c(worker.port());
  c.handshake();
  TestGraph graph(16, 4, 2);
  const uint64_t h = c.alloc(0, graph.bytes);
  const Bytes encoded = graph.encode(h);
  c.compute(0, 1, &encoded);
  Writer rec;
  rec.u32(0);
  rec.u64(99);
  c.send(Cmd::event_record, rec);
  Writer wait;
  wait.u32(1);
  wait.u64(99);
  c.send(Cmd::event_wait, wait);
  c.compute(1, 2, &encoded);  // device 1 reads the same buffer
  Writer sync;
  sync.u64(99);
  c.call(Cmd::event_sync, sync);
  Writer never;
  never.u64(12345);  // never recorded: passed
  c.call(Cmd::event_sync, never);
  c.synchronize(1);
}

// An async device with memory that is not host memory: every byte goes
// through the Buffer interface, and work runs behind the session's back.
TEST(WorkerSessions, NonHostDevice) {
  AsyncOptions ao;
  ao.isolated_memory = true;
  ao.delay_ms = 2;
  auto dev = make_async_device(ao);
  Worker worker({dev.get()}, quiet());
  worker.start();
  GoodClient client(worker.port(), 0, 5);
  client.round();
  client.round();
  Conn& c = client.conn();
  const uint64_t h = c.alloc(0, 256);
  std::vector<uint8_t> bytes(256);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  c.set(h, 0, bytes.data(), bytes.size());
  Writer memset;
  memset.u64(h);
  memset.u64(10);
  memset.u64(5);
  memset.u8(0xAA);
  c.send(Cmd::memset_tensor, memset);
  Writer copy;  // overlapping, forwards: [0, 100) -> [3, 103)
  copy.u64(h);
  copy.u64(0);
  copy.u64(h);
  copy.u64(3);
  copy.u64(100);
  c.send(Cmd::copy_tensor, copy);
  std::vector<uint8_t> want = bytes;
  std::fill(want.begin() + 10, want.begin() + 15, 0xAA);
  const std::vector<uint8_t> before = want;
  std::copy(before.begin(), before.begin() + 100, want.begin() + 3);
  EXPECT_EQ(c.get(h, 0, 256), want);
}

TEST(WorkerSessions, SetTensorHashWithoutCacheMisses) {
  auto cpu = make_cpu_device(1);
  Worker worker({cpu.get()}, quiet());
  worker.start();
  Conn c(worker.port());
  c.handshake();
  const uint64_t h = c.alloc(0, 64);
  const Bytes data(64, 7);
  EXPECT_FALSE(c.set_hash(h, 0, 64, content_hash(data.data(), data.size())));
}

// --- the tensor cache through the protocol ---

struct CacheWorker {
  explicit CacheWorker(const fs::path& dir) : cpu(make_cpu_device(1)) {
    WorkerOptions o = quiet();
    o.cache_dir = dir;
    worker = std::make_unique<Worker>(std::vector<Device*>{cpu.get()}, o);
    worker->start();
  }
  std::unique_ptr<Device> cpu;
  std::unique_ptr<Worker> worker;
};

Bytes pattern_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

TEST(WorkerCache, MissThenHitOnANewConnection) {
  TempDir dir;
  CacheWorker w(dir.path);
  const Bytes data = pattern_bytes(100000, 1);
  const ContentHash hash = content_hash(data.data(), data.size());
  {
    Conn c(w.worker->port());
    EXPECT_EQ(c.handshake() & kCapTensorCache, uint64_t{kCapTensorCache});
    const uint64_t h = c.alloc(0, 200000);
    EXPECT_FALSE(c.set_hash(h, 1000, data.size(), hash));
    c.set(h, 1000, data.data(), data.size());
    c.ping();  // the upload was handled (and cached) before this reply
  }
  EXPECT_TRUE(fs::exists(dir.path / TensorCache::file_name(hash, data.size())));
  Conn c(w.worker->port());
  c.handshake();
  const uint64_t h = c.alloc(0, data.size() + 8);
  EXPECT_TRUE(c.set_hash(h, 8, data.size(), hash));
  EXPECT_EQ(c.get(h, 8, data.size()), data);
}

TEST(WorkerCache, UploadInSeveralFramesIsCached) {
  TempDir dir;
  CacheWorker w(dir.path);
  const Bytes data = pattern_bytes(30000, 2);
  const ContentHash hash = content_hash(data.data(), data.size());
  {
    Conn c(w.worker->port());
    c.handshake();
    const uint64_t h = c.alloc(0, data.size());
    EXPECT_FALSE(c.set_hash(h, 0, data.size(), hash));
    c.set(h, 0, data.data(), 10000);
    c.set(h, 10000, data.data() + 10000, 20000);
    c.ping();
  }
  Conn c(w.worker->port());
  c.handshake();
  const uint64_t h = c.alloc(0, data.size());
  EXPECT_TRUE(c.set_hash(h, 0, data.size(), hash));
  EXPECT_EQ(c.get(h, 0, data.size()), data);
}

TEST(WorkerCache, PoisonedUploadIsNotStored) {
  TempDir dir;
  CacheWorker w(dir.path);
  const Bytes honest = pattern_bytes(4096, 3);
  const Bytes poison = pattern_bytes(4096, 4);
  const ContentHash hash = content_hash(honest.data(), honest.size());
  {
    Conn c(w.worker->port());
    c.handshake();
    const uint64_t h = c.alloc(0, 4096);
    EXPECT_FALSE(c.set_hash(h, 0, 4096, hash));
    c.set(h, 0, poison.data(), poison.size());  // not the bytes it announced
    c.ping();
  }
  EXPECT_FALSE(fs::exists(dir.path / TensorCache::file_name(hash, 4096)));
  Conn c(w.worker->port());
  c.handshake();
  const uint64_t h = c.alloc(0, 4096);
  EXPECT_FALSE(c.set_hash(h, 0, 4096, hash));  // still a miss: nothing stored under the honest hash
  c.set(h, 0, honest.data(), honest.size());
  c.ping();
  Conn d(w.worker->port());
  d.handshake();
  const uint64_t h2 = d.alloc(0, 4096);
  EXPECT_TRUE(d.set_hash(h2, 0, 4096, hash));
  EXPECT_EQ(d.get(h2, 0, 4096), honest);
}

TEST(WorkerCache, EntriesSurviveARestart) {
  TempDir dir;
  const Bytes data = pattern_bytes(5000, 5);
  const ContentHash hash = content_hash(data.data(), data.size());
  {
    CacheWorker w(dir.path);
    Conn c(w.worker->port());
    c.handshake();
    const uint64_t h = c.alloc(0, data.size());
    EXPECT_FALSE(c.set_hash(h, 0, data.size(), hash));
    c.set(h, 0, data.data(), data.size());
    c.ping();
  }
  CacheWorker w(dir.path);
  Conn c(w.worker->port());
  c.handshake();
  const uint64_t h = c.alloc(0, data.size());
  EXPECT_TRUE(c.set_hash(h, 0, data.size(), hash));
  EXPECT_EQ(c.get(h, 0, data.size()), data);
}

}  // namespace
}  // namespace weft::rpc::wtest
