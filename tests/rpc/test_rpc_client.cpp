// The RPC client against an in-process worker on loopback TCP: the
// conformance suite through a remote device (alone and with a local CPU
// under the scheduler), pipelining, the graph and tensor caches, uploads
// split under the frame limit, copies, events, authentication and the
// errors a worker reports. The lifetime scenarios of the seeds are in
// test_rpc_client_lifetime.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "client/connection.h"
#include "conformance/conformance.h"
#include "rpc_client_fixture.h"
#include "temp_dir.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using rpc_test::LocalWorker;
using rpc_test::SiluMatmul;

ErrorKind kind_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no weft::Error thrown";
  return ErrorKind::internal;
}

// A fresh directory under the test temp dir, removed with the object.
using weft::test::TempDir;

TEST(RpcClient, EndpointsAndSpecs) {
  EXPECT_EQ(rpc::parse_endpoint("127.0.0.1:50052").host, "127.0.0.1");
  EXPECT_EQ(rpc::parse_endpoint("127.0.0.1:50052").port, 50052);
  EXPECT_EQ(rpc::parse_endpoint("[::1]:7").host, "::1");
  EXPECT_EQ(rpc::parse_endpoint("[::1]:7").port, 7);
  EXPECT_EQ(rpc::parse_endpoint("worker.local:1").host, "worker.local");
  for (const char* bad : {"", "host", "host:", ":5", "host:0", "host:65536", "host:12x", "::1:5", "[::1]5", "[::1]:"}) {
    EXPECT_EQ(kind_of([&] { rpc::parse_endpoint(bad); }), ErrorKind::invalid_input) << bad;
  }
  LocalWorker w;
  {
    auto devices = make_rpc_devices(w.endpoint);
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0]->kind(), DeviceKind::remote);
  }
  EXPECT_EQ(rpc_open_connections(), 0);
}

TEST(RpcClient, UnreachableWorkerIsDisconnected) {
  uint16_t port = 0;
  {
    LocalWorker w;  // a port nobody listens on once it stops
    port = w.worker->port();
  }
  std::string message;
  EXPECT_EQ(kind_of([&] { make_rpc_devices("127.0.0.1:" + std::to_string(port)); }, &message), ErrorKind::disconnected);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_EQ(rpc_open_connections(), 0);
}

TEST(RpcClient, DevicesHoldNoConnection) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  ASSERT_EQ(devices.size(), 1u);
  Device& dev = *devices[0];
  EXPECT_EQ(rpc_open_connections(), 0);  // the question's connection is gone
  EXPECT_GT(dev.memory().total, 0u);
  EXPECT_EQ(rpc_open_connections(), 0);
  BufferType& bt = dev.default_buffer_type();
  EXPECT_FALSE(bt.is_host());
  EXPECT_GE(bt.alignment(), 1u);
  EXPECT_TRUE(dev.supports_buffer_type(bt));
  EXPECT_FALSE(dev.supports_buffer_type(w.cpu->default_buffer_type()));
  auto again = make_rpc_devices(w.endpoint);
  EXPECT_FALSE(dev.supports_buffer_type(again[0]->default_buffer_type()) &&
               &again[0]->default_buffer_type() == &bt);  // a different object, same endpoint and index
  EXPECT_TRUE(dev.supports_buffer_type(again[0]->default_buffer_type()));

  // Fake addresses: distinct, aligned, never overlapping.
  auto a = bt.allocate(1000);
  auto b = bt.allocate(1000);
  EXPECT_EQ(rpc_open_connections(), 1);
  const auto pa = reinterpret_cast<uintptr_t>(a->base());
  const auto pb = reinterpret_cast<uintptr_t>(b->base());
  EXPECT_EQ(pa % bt.alignment(), 0u);
  EXPECT_EQ(pb % bt.alignment(), 0u);
  EXPECT_TRUE(pa + 1000 <= pb || pb + 1000 <= pa);
  a.reset();
  b.reset();
  EXPECT_EQ(rpc_open_connections(), 0);
}

TEST(RpcClient, ConformanceSuite) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  {
    auto ex = conformance::make_backend_executor(*devices[0], 0);
    std::ostringstream out;
    const conformance::Summary s = conformance::run_suite(*ex, out, "", /*quiet=*/true);
    EXPECT_EQ(s.failed, 0) << out.str();
    EXPECT_GT(s.passed, 100);
    // Only flash_attn with sinks (a fifth source, not on the wire) is not
    // run by the worker; the scheduler's suite below runs them on the CPU.
    EXPECT_EQ(s.skipped, 4) << out.str();
  }
  EXPECT_EQ(rpc_open_connections(), 0);
}

TEST(RpcClient, ConformanceSuiteThroughScheduler) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(2);
  {
    auto remote = devices[0]->create_backend();
    auto cpu = local->create_backend();
    auto ex = conformance::make_scheduler_executor({remote.get(), cpu.get()});
    std::ostringstream out;
    const conformance::Summary s = conformance::run_suite(*ex, out, "", /*quiet=*/true);
    EXPECT_EQ(s.failed, 0) << out.str();
    EXPECT_GT(s.passed, 100);
  }
  EXPECT_EQ(rpc_open_connections(), 0);
}

TEST(RpcClient, CommandsArePipelined) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto backend = devices[0]->create_backend();
  constexpr int kN = 40;
  Context ctx;
  std::vector<Tensor*> inputs;
  Tensor* sum = nullptr;
  for (int i = 0; i < kN; ++i) {
    Tensor* t = ctx.new_tensor(DType::f32, {256});
    inputs.push_back(t);
    sum = sum == nullptr ? t : ops::add(ctx, sum, t);
  }
  Graph g;
  g.expand(sum);
  std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  auto buf = allocate_tensors(devices[0]->default_buffer_type(), all);
  const RpcStats before = rpc_stats(w.endpoint);
  for (int i = 0; i < kN; ++i) {
    std::vector<float> v(256, static_cast<float>(i + 1));
    if (i % 2 == 0) {
      tensor_set(*inputs[static_cast<size_t>(i)], v.data(), 0, v.size() * 4);
    } else {
      backend->set_tensor_async(*inputs[static_cast<size_t>(i)], v.data(), 0, v.size() * 4);
      v.assign(v.size(), -1.0f);  // the caller's memory is free at once
    }
  }
  backend->compute(g);
  EXPECT_EQ(rpc_stats(w.endpoint).round_trips, before.round_trips);  // nothing waited so far
  EXPECT_EQ(rpc_stats(w.endpoint).wait_seconds, before.wait_seconds);
  const auto t0 = std::chrono::steady_clock::now();
  backend->synchronize();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double waited = rpc_stats(w.endpoint).wait_seconds - before.wait_seconds;
  EXPECT_GT(waited, 0.0);  // the reply's wait is counted, and is part of the call's time
  EXPECT_LE(waited, wall);
  std::vector<float> out(256);
  tensor_get(*sum, out.data(), 0, out.size() * 4);
  EXPECT_EQ(rpc_stats(w.endpoint).round_trips, before.round_trips + 2);
  for (float f : out) ASSERT_EQ(f, kN * (kN + 1) / 2);
}

TEST(RpcClient, SecondComputeOfAGraphSendsOnlyItsId) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto backend = devices[0]->create_backend();
  SiluMatmul m(64, 32, 3);
  auto buf = m.allocate(devices[0]->default_buffer_type());
  const uint64_t s0 = rpc_stats(w.endpoint).bytes_sent;
  backend->compute(m.g);
  backend->flush();  // a stored graph's id waits for the submission's end (Connection::send_later)
  const uint64_t s1 = rpc_stats(w.endpoint).bytes_sent;
  backend->compute(m.g);
  backend->flush();
  const uint64_t s2 = rpc_stats(w.endpoint).bytes_sent;
  backend->synchronize();
  EXPECT_GT(s1 - s0, 4 * 100u);                     // the graph: four tensors
  EXPECT_EQ(s2 - s1, rpc::kFrameHeaderBytes + 13);  // device, graph id, has_graph = 0
  EXPECT_TRUE(m.correct());

  // More graphs than the cache holds, then the first again: still right.
  std::vector<std::unique_ptr<SiluMatmul>> others;
  std::vector<std::unique_ptr<Buffer>> bufs;
  for (size_t i = 0; i < rpc::Connection::kGraphCacheSize + 2; ++i) {
    others.push_back(std::make_unique<SiluMatmul>(64, 32, 3, static_cast<float>(i)));
    bufs.push_back(others.back()->allocate(devices[0]->default_buffer_type()));
    backend->compute(others.back()->g);
  }
  const std::vector<float> zeros(static_cast<size_t>(m.y->nelements()), 0.0f);
  tensor_set(*m.y, zeros.data(), 0, m.y->nbytes());
  backend->compute(m.g);
  backend->synchronize();
  EXPECT_TRUE(m.correct());
  for (auto& o : others) EXPECT_TRUE(o->correct());
}

TEST(RpcClient, TensorCacheSkipsBytesTheWorkerHas) {
  TempDir dir;
  rpc::WorkerOptions o;
  o.cache_dir = dir.path;
  LocalWorker w(o);
  auto devices = make_rpc_devices(w.endpoint);
  constexpr size_t kBytes = size_t{8} << 20;
  const std::vector<float> data = rpc_test::pattern(kBytes / 4, 0.013f, 0.5f);

  auto upload = [&](uint64_t* sent) {
    Context ctx;
    Tensor* t = ctx.new_tensor(DType::f32, {static_cast<int64_t>(data.size())});
    std::vector<Tensor*> all{t};
    auto buf = allocate_tensors(devices[0]->default_buffer_type(), all);
    const uint64_t before = rpc_stats(w.endpoint).bytes_sent;
    tensor_set(*t, data.data(), 0, kBytes);
    *sent = rpc_stats(w.endpoint).bytes_sent - before;
    std::vector<float> back(data.size());
    tensor_get(*t, back.data(), 0, kBytes);
    EXPECT_EQ(back, data);
  };
  uint64_t first = 0, second = 0;
  upload(&first);
  EXPECT_EQ(rpc_open_connections(), 0);  // the second upload is a new session
  upload(&second);
  EXPECT_GE(first, kBytes);
  EXPECT_LT(second, 1024u);
}

TEST(RpcClient, BigUploadsAreSplitUnderTheFrameLimit) {
  LocalWorker w;
  RpcOptions o;
  o.cache_min_bytes = SIZE_MAX;  // plain uploads only
  auto devices = make_rpc_devices(w.endpoint, o);
  constexpr size_t kBytes = (size_t{64} << 20) + (size_t{3} << 20) + 12;  // two SET_TENSOR frames
  std::vector<uint8_t> data(kBytes);
  for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::i32, {static_cast<int64_t>(kBytes / 4)});
  std::vector<Tensor*> all{t};
  auto buf = allocate_tensors(devices[0]->default_buffer_type(), all);
  const uint64_t before = rpc_stats(w.endpoint).bytes_sent;
  tensor_set(*t, data.data(), 0, kBytes);
  EXPECT_EQ(rpc_stats(w.endpoint).bytes_sent - before, kBytes + 2 * (rpc::kFrameHeaderBytes + 24));
  std::vector<uint8_t> back(kBytes);
  tensor_get(*t, back.data(), 0, kBytes);
  EXPECT_TRUE(back == data);
  // A part of it, at an offset.
  std::vector<uint8_t> part(1000);
  tensor_get(*t, part.data(), 4000, part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 4000));
}

TEST(RpcClient, CopiesMemsetAndClear) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto local = make_cpu_device(1);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {100});
  Tensor* b = ctx.new_tensor(DType::f32, {100});
  Tensor* h = ctx.new_tensor(DType::f32, {100});
  Tensor* odd = ctx.new_tensor(DType::f32, {50, 2});
  std::vector<Tensor*> ra{a}, rb{b, odd}, rh{h};
  auto buf_a = allocate_tensors(devices[0]->default_buffer_type(), ra);
  auto buf_b = allocate_tensors(devices[0]->default_buffer_type(), rb);
  auto buf_h = allocate_tensors(local->default_buffer_type(), rh);
  const std::vector<float> va = rpc_test::pattern(100, 0.5f, 0.0f);
  const std::vector<float> vh = rpc_test::pattern(100, 0.25f, 1.0f);
  tensor_set(*a, va.data(), 0, 400);
  tensor_set(*h, vh.data(), 0, 400);
  std::vector<float> out(100);

  ASSERT_TRUE(buf_b->copy_tensor(*a, *b));  // worker side
  tensor_get(*b, out.data(), 0, 400);
  EXPECT_EQ(out, va);
  ASSERT_TRUE(buf_b->copy_tensor(*h, *b));  // from host memory
  tensor_get(*b, out.data(), 0, 400);
  EXPECT_EQ(out, vh);
  EXPECT_FALSE(buf_b->copy_tensor(*a, *odd));  // shapes differ
  EXPECT_FALSE(buf_h->copy_tensor(*a, *h));    // the CPU cannot read worker memory

  buf_b->memset_tensor(*b, 0, 8, 8);
  tensor_get(*b, out.data(), 0, 400);
  EXPECT_EQ(out[1], vh[1]);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], vh[4]);
  buf_a->clear(0);
  tensor_get(*a, out.data(), 0, 400);
  EXPECT_EQ(out, std::vector<float>(100, 0.0f));

  auto backend = devices[0]->create_backend();
  ASSERT_TRUE(backend->copy_tensor_async(*backend, *b, *a));
  backend->synchronize();
  tensor_get(*a, out.data(), 0, 400);
  EXPECT_EQ(out[0], vh[0]);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(RpcClient, EventsOrderStreams) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  auto first = devices[0]->create_backend();
  auto second = devices[0]->create_backend();
  auto ev = devices[0]->create_event();
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(&ev->device(), devices[0].get());
  ev->synchronize();  // never recorded: done
  SiluMatmul m(128, 64, 4);
  auto buf = m.allocate(devices[0]->default_buffer_type());
  first->compute(m.g);
  first->record_event(*ev);
  second->wait_event(*ev);
  ev->synchronize();
  EXPECT_TRUE(m.correct());
  // Ids are reused: many more events than a session may hold, one at a time.
  for (int i = 0; i < 5000; ++i) {
    auto e = devices[0]->create_event();
    ASSERT_NE(e, nullptr);
    if (i % 1000 == 0) {
      first->record_event(*e);
      e->synchronize();
    }
  }
  first->synchronize();
}

TEST(RpcClient, WorkerErrorsKeepTheirKind) {
  rpc::WorkerOptions o;
  o.memory_budget = size_t{32} << 20;
  LocalWorker w(o);
  auto devices = make_rpc_devices(w.endpoint);
  BufferType& bt = devices[0]->default_buffer_type();
  std::string message;
  EXPECT_EQ(kind_of([&] { bt.allocate(size_t{64} << 20); }, &message), ErrorKind::out_of_memory);
  EXPECT_NE(message.find(w.endpoint), std::string::npos) << message;
  EXPECT_NE(message.find("ALLOC_BUFFER"), std::string::npos) << message;
  EXPECT_EQ(rpc_open_connections(), 0);

  // A tensor in host memory cannot be part of a remote graph: refused here,
  // naming it, and the connection stays usable.
  auto backend = devices[0]->create_backend();
  auto local = make_cpu_device(1);
  SiluMatmul m(32, 16, 2);
  auto host_buf = m.allocate(local->default_buffer_type());
  EXPECT_EQ(kind_of([&] { backend->compute(m.g); }, &message), ErrorKind::invalid_input);
  EXPECT_NE(message.find("'w'"), std::string::npos) << message;
  backend->synchronize();
  auto small = bt.allocate(1 << 20);
  EXPECT_EQ(small->size(), size_t{1} << 20);
}

TEST(RpcClient, UnsendableTensorsAreRefusedHere) {
  LocalWorker w;
  auto devices = make_rpc_devices(w.endpoint);
  Device& dev = *devices[0];
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {64});
  Tensor* odd = ops::view_1d(ctx, a, 8, 2);  // 2 bytes into f32 data: the worker refuses that alignment
  Tensor* y = ops::scale(ctx, odd, 2.0f);
  Tensor* fine = ops::scale(ctx, ops::view_1d(ctx, a, 8, 4), 2.0f);
  EXPECT_FALSE(dev.supports_op(*y));
  EXPECT_TRUE(dev.supports_op(*fine));
  Tensor* huge = ctx.new_tensor(DType::f32, {int64_t{1} << 20, int64_t{1} << 13, 0});  // no bytes, 2^33 nominal
  EXPECT_FALSE(dev.supports_op(*ops::scale(ctx, huge, 2.0f)));

  Graph g;
  g.expand(y);
  std::vector<Tensor*> all(g.leafs().begin(), g.leafs().end());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  auto buf = allocate_tensors(dev.default_buffer_type(), all);
  auto backend = dev.create_backend();
  std::string message;
  EXPECT_EQ(kind_of([&] { backend->compute(g); }, &message), ErrorKind::unsupported);
  EXPECT_NE(message.find("aligned"), std::string::npos) << message;
  backend->synchronize();  // the session lives on
}

TEST(RpcClient, AuthenticationWithASecret) {
  rpc::WorkerOptions o;
  o.auth_secret = "correct horse";
  LocalWorker w(o);
  std::string message;
  EXPECT_EQ(kind_of([&] { make_rpc_devices(w.endpoint); }, &message), ErrorKind::invalid_input);
  EXPECT_NE(message.find("secret"), std::string::npos) << message;
  RpcOptions wrong;
  wrong.auth_secret = "battery staple";
  EXPECT_EQ(kind_of([&] { make_rpc_devices(w.endpoint, wrong); }), ErrorKind::invalid_input);
  EXPECT_EQ(rpc_open_connections(), 0);

  RpcOptions right;
  right.auth_secret = "correct horse";
  auto devices = make_rpc_devices(w.endpoint, right);
  ASSERT_EQ(devices.size(), 1u);
  auto backend = devices[0]->create_backend();
  SiluMatmul m(32, 16, 2);
  auto buf = m.allocate(devices[0]->default_buffer_type());
  backend->compute(m.g);
  backend->synchronize();
  EXPECT_TRUE(m.correct());
}

}  // namespace
}  // namespace weft
