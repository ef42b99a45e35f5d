// The async test backend: calls return at once, work runs in order on a
// worker, events order streams, errors reach synchronize(), and separate
// devices really run at the same time.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <vector>

#include "conformance/conformance.h"
#include "weft/backend/cpu.h"
#include "weft/core/context.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/testing/async.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

constexpr int64_t kN = 256;

std::vector<float> ramp(float start) {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

std::vector<float> scaled(const std::vector<float>& v, float s) {
  std::vector<float> out(v);
  for (float& f : out) f *= s;
  return out;
}

// y = x * s, every tensor in one buffer of type bt.
struct ScaleGraph {
  ScaleGraph(BufferType& bt, float s) {
    x = ctx.new_tensor(DType::f32, {kN});
    y = ops::scale(ctx, x, s);
    g.expand(y);
    std::vector<Tensor*> all{x, y};
    buf = allocate_tensors(bt, all);
  }
  size_t bytes() const { return x->nbytes(); }

  Context ctx;
  Tensor* x;
  Tensor* y;
  Graph g;
  std::unique_ptr<Buffer> buf;
};

std::unique_ptr<Device> async_device(double delay_ms, const std::string& name = "async") {
  AsyncOptions o;
  o.delay_ms = delay_ms;
  o.name = name;
  return make_async_device(o);
}

TEST(AsyncDevice, HasItsOwnHostBufferTypeUnlessShared) {
  auto cpu = make_cpu_device(1);
  auto dev = async_device(0);
  EXPECT_EQ(dev->kind(), DeviceKind::gpu);
  BufferType& bt = dev->default_buffer_type();
  EXPECT_TRUE(bt.is_host());
  EXPECT_EQ(&bt.device(), dev.get());
  EXPECT_NE(&bt, &cpu->default_buffer_type());
  EXPECT_TRUE(dev->supports_buffer_type(cpu->default_buffer_type()));
  ScaleGraph sg(bt, 2);
  EXPECT_EQ(&sg.buf->type(), &bt);  // buffers report the async type, not the inner CPU one
  EXPECT_TRUE(dev->supports_op(*sg.y));

  AsyncOptions shared;
  shared.shared_buffer_type = &cpu->default_buffer_type();
  auto dev2 = make_async_device(shared);
  EXPECT_EQ(&dev2->default_buffer_type(), &cpu->default_buffer_type());

  AsyncOptions bad;
  bad.delay_ms = -1;
  EXPECT_THROW(make_async_device(bad), Error);
}

TEST(AsyncBackend, CallsReturnAtOnceWhileComputeIsDelayed) {
  auto dev = async_device(50);
  auto backend = dev->create_backend();
  ScaleGraph sg(dev->default_buffer_type(), 2);
  const std::vector<float> x = ramp(1);
  std::vector<float> y(kN, -1);

  const Clock::time_point t0 = Clock::now();
  backend->set_tensor_async(*sg.x, x.data(), 0, sg.bytes());
  backend->compute(sg.g);
  backend->get_tensor_async(*sg.y, y.data(), 0, sg.bytes());
  const Clock::time_point t1 = Clock::now();
  backend->synchronize();
  const Clock::time_point t2 = Clock::now();

  EXPECT_LT(Ms(t1 - t0).count(), 25.0) << "the calls waited for the delayed compute";
  EXPECT_GE(Ms(t2 - t0).count(), 50.0);
  EXPECT_EQ(y, scaled(x, 2));
}

TEST(AsyncBackend, RunsQueuedWorkInSubmissionOrder) {
  auto dev = async_device(20);
  auto backend = dev->create_backend();
  ScaleGraph sg(dev->default_buffer_type(), 3);
  const std::vector<float> x1 = ramp(1), x2 = ramp(-100);
  std::vector<float> y1(kN), y2(kN);
  // The second set must not overtake the first, delayed, compute.
  backend->set_tensor_async(*sg.x, x1.data(), 0, sg.bytes());
  backend->compute(sg.g);
  backend->get_tensor_async(*sg.y, y1.data(), 0, sg.bytes());
  backend->set_tensor_async(*sg.x, x2.data(), 0, sg.bytes());
  backend->compute(sg.g);
  backend->get_tensor_async(*sg.y, y2.data(), 0, sg.bytes());
  backend->synchronize();
  EXPECT_EQ(y1, scaled(x1, 3));
  EXPECT_EQ(y2, scaled(x2, 3));
  const std::vector<ComputeWindow> log = async_compute_log(*backend);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_LE(log[0].end, log[1].start);  // one stream: never overlapping
}

TEST(AsyncBackend, ChecksArgumentsWhenCalled) {
  auto dev = async_device(0);
  auto backend = dev->create_backend();
  ScaleGraph sg(dev->default_buffer_type(), 2);
  std::vector<float> x(kN + 1);
  EXPECT_THROW(backend->set_tensor_async(*sg.x, x.data(), 0, sg.bytes() + 4), Error);
  EXPECT_THROW(backend->get_tensor_async(*sg.x, x.data(), 8, sg.bytes()), Error);

  Context ctx;
  Tensor* other = ctx.new_tensor(DType::f32, {kN / 2});
  Tensor* m = ctx.new_tensor(DType::f32, {8, kN / 8});
  Tensor* mt = ops::transpose(ctx, m);  // same bytes, not contiguous
  std::vector<Tensor*> all{other, m, mt};
  auto buf = allocate_tensors(dev->default_buffer_type(), all);
  EXPECT_FALSE(backend->copy_tensor_async(*backend, *sg.x, *other));  // sizes differ
  EXPECT_FALSE(backend->copy_tensor_async(*backend, *mt, *sg.x));     // not contiguous
  EXPECT_TRUE(backend->copy_tensor_async(*backend, *m, *sg.x));
  backend->synchronize();
}

TEST(AsyncBackend, TaskErrorSurfacesAtSynchronizeAndBackendRecovers) {
  auto dev = async_device(0);
  auto backend = dev->create_backend();
  // add of two i32 tensors, built by hand: the op constructor would refuse it.
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::i32, {kN});
  Tensor* b = ctx.new_tensor(DType::i32, {kN});
  Tensor* bad = ctx.new_tensor(DType::i32, {kN});
  bad->op = Op::add;
  bad->src[0] = a;
  bad->src[1] = b;
  bad->name = "bad";
  Graph g;
  g.expand(bad);
  std::vector<Tensor*> all{a, b, bad};
  auto buf = allocate_tensors(dev->default_buffer_type(), all);
  EXPECT_FALSE(dev->supports_op(*bad));

  ScaleGraph sg(dev->default_buffer_type(), 2);
  const std::vector<float> x = ramp(3);
  std::vector<float> y(kN);
  backend->compute(g);  // returns: the error is the stream's
  backend->set_tensor_async(*sg.x, x.data(), 0, sg.bytes());
  backend->compute(sg.g);  // work after a failed task still runs
  backend->get_tensor_async(*sg.y, y.data(), 0, sg.bytes());
  try {
    backend->synchronize();
    ADD_FAILURE() << "synchronize did not rethrow the task's error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("bad"), std::string::npos) << e.what();
  }
  EXPECT_EQ(y, scaled(x, 2));
  EXPECT_NO_THROW(backend->synchronize());  // the error was cleared

  std::vector<float> y2(kN);
  backend->compute(sg.g);
  backend->get_tensor_async(*sg.y, y2.data(), 0, sg.bytes());
  EXPECT_NO_THROW(backend->synchronize());
  EXPECT_EQ(y2, scaled(x, 2));
}

TEST(AsyncBackend, DestroyingWithQueuedWorkFinishesItSafely) {
  auto dev = async_device(30);
  ScaleGraph sg(dev->default_buffer_type(), 5);
  const std::vector<float> x = ramp(7);
  std::vector<float> y(kN);
  {
    auto backend = dev->create_backend();
    auto event = dev->create_event();
    backend->set_tensor_async(*sg.x, x.data(), 0, sg.bytes());
    backend->compute(sg.g);
    backend->record_event(*event);
    backend->get_tensor_async(*sg.y, y.data(), 0, sg.bytes());
    event.reset();  // a queued record outlives its Event object
    // Leaving the scope destroys the backend: it drains the queue, then joins.
  }
  EXPECT_EQ(y, scaled(x, 5));

  // A pending error is dropped by the destructor, never thrown.
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::i32, {kN});
  Tensor* bad = ctx.new_tensor(DType::i32, {kN});
  bad->op = Op::sqrt;
  bad->src[0] = a;
  Graph g;
  g.expand(bad);
  std::vector<Tensor*> all{a, bad};
  auto buf = allocate_tensors(dev->default_buffer_type(), all);
  auto backend = dev->create_backend();
  backend->compute(g);
  backend->compute(g);
  EXPECT_NO_THROW(backend.reset());
}

TEST(AsyncEvent, TimeAdvancesWithEachRecord) {
  auto dev = async_device(30);
  auto backend = dev->create_backend();
  auto event = dev->create_event();
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(&event->device(), dev.get());
  EXPECT_FALSE(async_event_time(*event).has_value());  // never recorded

  ScaleGraph sg(dev->default_buffer_type(), 2);
  backend->record_event(*event);
  event->synchronize();
  const auto first = async_event_time(*event);
  ASSERT_TRUE(first.has_value());

  backend->compute(sg.g);  // delayed 30 ms
  backend->record_event(*event);
  EXPECT_FALSE(async_event_time(*event).has_value());  // not reached yet
  event->synchronize();
  const auto second = async_event_time(*event);
  ASSERT_TRUE(second.has_value());
  EXPECT_GE(Ms(*second - *first).count(), 30.0);
  const std::vector<ComputeWindow> log = async_compute_log(*backend);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_LE(log[0].end, *second);
}

TEST(AsyncEvent, NeverRecordedCountsAsReached) {
  auto dev = async_device(0);
  auto backend = dev->create_backend();
  auto event = dev->create_event();
  event->synchronize();
  backend->wait_event(*event);
  backend->synchronize();
}

TEST(AsyncEvent, WaitOrdersWorkAcrossBackendsOfOneDevice) {
  auto dev = async_device(40);
  auto a = dev->create_backend();
  auto b = dev->create_backend();
  auto done = dev->create_event();

  ScaleGraph first(dev->default_buffer_type(), 2);   // on a: y = 2x
  ScaleGraph second(dev->default_buffer_type(), 3);  // on b: z = 3y
  const std::vector<float> x = ramp(1);
  std::vector<float> z(kN);

  a->set_tensor_async(*first.x, x.data(), 0, first.bytes());
  a->compute(first.g);  // slow: without the wait b would copy y before it is written
  a->record_event(*done);
  b->wait_event(*done);
  ASSERT_TRUE(b->copy_tensor_async(*a, *first.y, *second.x));
  b->compute(second.g);
  b->get_tensor_async(*second.y, z.data(), 0, second.bytes());
  b->synchronize();
  EXPECT_EQ(z, scaled(x, 6));

  const auto reached = async_event_time(*done);
  ASSERT_TRUE(reached.has_value());
  const std::vector<ComputeWindow> log_a = async_compute_log(*a);
  const std::vector<ComputeWindow> log_b = async_compute_log(*b);
  ASSERT_EQ(log_a.size(), 1u);
  ASSERT_EQ(log_b.size(), 1u);
  EXPECT_LE(log_a[0].end, *reached);
  EXPECT_LE(*reached, log_b[0].start);
  a->synchronize();
}

TEST(AsyncEvent, BelongsToItsDevice) {
  auto dev1 = async_device(0, "async1");
  auto dev2 = async_device(0, "async2");
  auto backend2 = dev2->create_backend();
  auto event1 = dev1->create_event();
  EXPECT_THROW(backend2->record_event(*event1), Error);
  EXPECT_THROW(backend2->wait_event(*event1), Error);

  auto cpu = make_cpu_device(1);
  auto cpu_backend = cpu->create_backend();
  EXPECT_THROW(async_compute_log(*cpu_backend), Error);
}

TEST(AsyncDevice, BackendsOfTwoDevicesRunConcurrently) {
  auto dev1 = async_device(40, "async1");
  auto dev2 = async_device(40, "async2");
  auto b1 = dev1->create_backend();
  auto b2 = dev2->create_backend();
  ScaleGraph g1(dev1->default_buffer_type(), 2);
  ScaleGraph g2(dev2->default_buffer_type(), 2);
  b1->compute(g1.g);
  b2->compute(g2.g);
  b1->synchronize();
  b2->synchronize();
  const std::vector<ComputeWindow> w1 = async_compute_log(*b1);
  const std::vector<ComputeWindow> w2 = async_compute_log(*b2);
  ASSERT_EQ(w1.size(), 1u);
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_LT(w1[0].start, w2[0].end);
  EXPECT_LT(w2[0].start, w1[0].end);
}

TEST(AsyncDevice, RandomDelayAddsToTheFixedOne) {
  AsyncOptions o;
  o.delay_ms = 5;
  o.random_delay_ms = 10;
  o.seed = 42;
  auto dev = make_async_device(o);
  auto backend = dev->create_backend();
  ScaleGraph sg(dev->default_buffer_type(), 2);
  for (int i = 0; i < 4; ++i) backend->compute(sg.g);
  backend->synchronize();
  const std::vector<ComputeWindow> log = async_compute_log(*backend);
  ASSERT_EQ(log.size(), 4u);
  for (const ComputeWindow& w : log) EXPECT_GE(Ms(w.end - w.start).count(), 5.0);
}

TEST(AsyncDevice, SharedBufferTypeHoldsTensorsOfBothDevices) {
  auto cpu = make_cpu_device(1);
  AsyncOptions o;
  o.shared_buffer_type = &cpu->default_buffer_type();
  o.delay_ms = 20;
  auto dev = make_async_device(o);
  auto backend = dev->create_backend();
  ScaleGraph sg(dev->default_buffer_type(), 4);  // a CPU buffer
  EXPECT_EQ(&sg.buf->type(), &cpu->default_buffer_type());
  const std::vector<float> x = ramp(2);
  std::vector<float> y(kN);
  backend->set_tensor_async(*sg.x, x.data(), 0, sg.bytes());
  backend->compute(sg.g);
  backend->get_tensor_async(*sg.y, y.data(), 0, sg.bytes());
  backend->synchronize();
  EXPECT_EQ(y, scaled(x, 4));
}

// The same suite every backend passes, through the async stream.
TEST(AsyncDevice, PassesTheConformanceSuite) {
  AsyncOptions o;
  o.n_threads = 2;
  auto dev = make_async_device(o);
  auto ex = conformance::make_backend_executor(*dev, 2);
  std::ostringstream out;
  const conformance::Summary s = conformance::run_suite(*ex, out, "", true);
  EXPECT_EQ(s.failed, 0) << out.str();
  EXPECT_GT(s.passed, 0);
}

}  // namespace
}  // namespace weft
