// The scheduler's execution rules, each proved by a test that can fail:
// the seed-003 memory-reuse race, overlap of splits in disjoint buffers,
// and splits with input copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "rpc/local_workers.h"
#include "sched/scheduler_testing.h"
#include "tensor_read.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/ops.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace weft {
namespace {

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

using test::read;

// Split 0 (a delayed async backend) reads u, its last reader; split 1 (the
// CPU, no inputs from split 0) computes w into memory the allocator reused
// from u. Without the hazard wait the CPU overwrites u before the async
// backend has read it.
struct RaceGraph {
  Context ctx;
  Graph graph;
  Tensor *in, *k, *v, *w;

  RaceGraph() {
    in = ctx.new_tensor(DType::f32, {256});
    k = ctx.new_tensor(DType::f32, {256});
    in->flags |= kFlagInput;
    k->flags |= kFlagInput;
    Tensor* u = ops::scale(ctx, in, 2.0f);
    v = ops::sum_rows(ctx, ops::sqr(ctx, ops::reshape(ctx, u, {16, 16})));  // reads u, not in place
    w = ops::scale(ctx, ops::cont(ctx, k), 3.0f);
    v->flags |= kFlagOutput;
    w->flags |= kFlagOutput;
    graph.expand(v);
    graph.expand(w);
  }
};

int count_wrong_runs(bool skip_hazard_waits, int runs) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.delay_ms = 2;
  ao.shared_buffer_type = &cpu->default_buffer_type();  // one physical buffer for both
  auto async = make_async_device(ao);
  auto cpu_backend = cpu->create_backend();
  auto async_backend = async->create_backend();
  Scheduler sched({async_backend.get(), cpu_backend.get()}, SchedulerOptions{});
  SchedulerTestAccess::skip_hazard_waits(sched, skip_hazard_waits);
  std::mt19937 rng(7);
  int wrong = 0;
  for (int run = 0; run < runs; ++run) {
    RaceGraph rg;
    for (Tensor* t : rg.graph.nodes()) {  // everything up to v on async, w's chain on the CPU
      const bool cpu_side = t == rg.w || t == rg.w->src[0];
      sched.set_backend(*t, cpu_side ? *cpu_backend : *async_backend);
    }
    sched.allocate(rg.graph);
    EXPECT_EQ(sched.splits().size(), 2u);
    const auto in = random_values(256, rng);
    const auto k = random_values(256, rng);
    tensor_set(*rg.in, in.data(), 0, rg.in->nbytes());
    tensor_set(*rg.k, k.data(), 0, rg.k->nbytes());
    sched.compute(rg.graph);
    const auto v = read(*rg.v);
    const auto w = read(*rg.w);
    bool ok = true;
    for (int r = 0; r < 16; ++r) {
      double sum = 0;
      for (int i = 0; i < 16; ++i) sum += 4.0 * in[static_cast<size_t>(r * 16 + i)] * in[static_cast<size_t>(r * 16 + i)];
      ok = ok && std::fabs(v[static_cast<size_t>(r)] - sum) <= 1e-4 * (1 + std::fabs(sum));
    }
    for (size_t i = 0; i < 256; ++i) ok = ok && w[i] == 3.0f * k[i];
    if (!ok) ++wrong;
  }
  return wrong;
}

TEST(SchedulerRace, SplitWithoutInputsWaitsForReusedMemory) {
  // The plan really reuses memory across the two splits.
  EXPECT_EQ(count_wrong_runs(false, 200), 0);
}

TEST(SchedulerRace, DisablingTheHazardWaitShowsTheRace) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "this test races on purpose; ThreadSanitizer would (rightly) report it";
#endif
  EXPECT_GT(count_wrong_runs(true, 20), 10);
}

TEST(SchedulerRace, PlanReportsTheHazardWait) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.shared_buffer_type = &cpu->default_buffer_type();
  auto async = make_async_device(ao);
  auto cb = cpu->create_backend();
  auto ab = async->create_backend();
  Scheduler sched({ab.get(), cb.get()});
  RaceGraph rg;
  for (Tensor* t : rg.graph.nodes()) sched.set_backend(*t, t == rg.w || t == rg.w->src[0] ? *cb : *ab);
  sched.allocate(rg.graph);
  ASSERT_EQ(sched.splits().size(), 2u);
  EXPECT_EQ(sched.splits()[1].n_input_copies, 0);
  EXPECT_EQ(sched.splits()[1].waits_for, std::vector<int>{0});
}

// A tensor of this host's that only a worker's split reads: u, a leaf the
// CPU's cpy writes (a leaf stays out of the outputs the allocator keeps),
// read by the worker's split through an input copy, which the host makes
// through host memory while it submits that split (a worker's upload takes
// the bytes at once). The CPU's next split takes u's bytes (the planner's
// hazard, rule 2) and need not wait for the worker: submitting the graph
// returns while the worker's device is still in its delay, and the results
// are right. A copy the destination makes itself later (the async device's
// own, SplitWithoutInputsWaitsForReusedMemory) keeps the wait.
TEST(SchedulerRace, AReadMadeAtSubmissionNeedsNoWait) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.delay_ms = 1000;  // far longer than submitting takes, even under a sanitizer on a loaded machine
  testing::LocalWorkers worker(1, [&](int) { return make_async_device(ao); });
  auto remote = make_rpc_devices(worker.endpoint(0));
  auto cpu_backend = cpu->create_backend();
  auto async_backend = remote.at(0)->create_backend();
  Scheduler sched({cpu_backend.get(), async_backend.get()});
  Context ctx;
  Tensor* in = ctx.new_tensor(DType::f32, {256});
  Tensor* k = ctx.new_tensor(DType::f32, {256});
  in->flags |= kFlagInput;
  k->flags |= kFlagInput;
  Tensor* u = ops::cpy(ctx, ops::scale(ctx, in, 2.0f), ctx.new_tensor(DType::f32, {256}));
  Tensor* sq = ops::sqr(ctx, ops::reshape(ctx, u, {16, 16}));
  Tensor* v = ops::sum_rows(ctx, sq);
  Tensor* w = ops::add(ctx, ops::cont(ctx, k), ops::scale(ctx, k, 3.0f));  // two new tensors: u's bytes and more
  v->flags |= kFlagOutput;
  w->flags |= kFlagOutput;
  Graph g;
  g.expand(v);
  g.expand(w);
  for (Tensor* t : g.nodes()) sched.set_backend(*t, t == sq || t == v ? *async_backend : *cpu_backend);
  sched.allocate(g);
  ASSERT_EQ(sched.splits().size(), 3u);
  EXPECT_EQ(sched.splits()[1].n_input_copies, 1);
  EXPECT_EQ(sched.splits()[2].waits_for, std::vector<int>{1});  // the planner's hazard: u's bytes reused
  std::mt19937 rng(11);
  const auto x = random_values(256, rng);
  const auto y = random_values(256, rng);
  tensor_set(*in, x.data(), 0, in->nbytes());
  tensor_set(*k, y.data(), 0, k->nbytes());
  sched.compute_async(g);
  EXPECT_TRUE(async_device_compute_log(worker.device(0)).empty()) << "the host waited for the worker's split";
  sched.wait(g);
  const auto got_v = read(*v);
  const auto got_w = read(*w);
  for (int r = 0; r < 16; ++r) {
    double sum = 0;
    for (int i = 0; i < 16; ++i) sum += 4.0 * x[static_cast<size_t>(r * 16 + i)] * x[static_cast<size_t>(r * 16 + i)];
    EXPECT_NEAR(got_v[static_cast<size_t>(r)], sum, 1e-4 * (1 + std::fabs(sum))) << "row " << r;
  }
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(got_w[i], y[i] + 3.0f * y[i]) << i;
}

TEST(SchedulerOverlap, SplitsInDisjointBuffersRunConcurrently) {
  constexpr double kDelayMs = 150;
  AsyncOptions ao;
  ao.delay_ms = kDelayMs;
  auto dev1 = make_async_device(ao);
  auto dev2 = make_async_device(ao);
  auto b1 = dev1->create_backend();
  auto b2 = dev2->create_backend();
  Scheduler sched({b1.get(), b2.get()});
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {64});
  Tensor* y = ctx.new_tensor(DType::f32, {64});
  x->flags |= kFlagInput;
  y->flags |= kFlagInput;
  Tensor* fx = ops::silu(ctx, x);
  Tensor* fy = ops::silu(ctx, y);
  Graph g;
  g.expand(fx);
  g.expand(fy);
  sched.set_backend(*fx, *b1);
  sched.set_backend(*fy, *b2);
  sched.allocate(g);
  ASSERT_EQ(sched.splits().size(), 2u);
  EXPECT_TRUE(sched.splits()[1].waits_for.empty());
  std::vector<float> ones(64, 1.0f);
  tensor_set(*x, ones.data(), 0, x->nbytes());
  tensor_set(*y, ones.data(), 0, y->nbytes());
  sched.compute(g);
  const auto w1 = async_compute_log(*b1);
  const auto w2 = async_compute_log(*b2);
  ASSERT_EQ(w1.size(), 1u);
  ASSERT_EQ(w2.size(), 1u);
  const auto span = std::max(w1[0].end, w2[0].end) - std::min(w1[0].start, w2[0].start);
  const double span_ms = std::chrono::duration<double, std::milli>(span).count();
  // Serial would take two delays; concurrent about one. Generous factor.
  EXPECT_LT(span_ms, 1.6 * kDelayMs);
  EXPECT_GE(span_ms, kDelayMs);
  EXPECT_FLOAT_EQ(read(*fx)[0], 1.0f / (1.0f + std::exp(-1.0f)));
}

TEST(SchedulerCopies, HostBackendsReadEachOthersMemoryDirectly) {
  // Two CPU devices with separate buffers: each reads host memory directly,
  // so no copies, but split 1 waits for split 0 (rule 1).
  auto c1 = make_cpu_device(1);
  auto c2 = make_cpu_device(1);
  auto b1 = c1->create_backend();
  auto b2 = c2->create_backend();
  Scheduler sched({b1.get(), b2.get()});
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {8, 4});
  x->flags |= kFlagInput;
  Tensor* a = ops::scale(ctx, x, 2.0f);
  Tensor* b = ops::add(ctx, ops::cont(ctx, ops::transpose(ctx, a)), ops::view_1d(ctx, a, 1, 4));
  Graph g;
  g.expand(b);
  sched.set_backend(*a, *b1);
  for (Tensor* n : g.nodes()) {
    if (n != a) sched.set_backend(*n, *b2);
  }
  sched.allocate(g);
  ASSERT_EQ(sched.splits().size(), 2u);
  EXPECT_EQ(sched.splits()[1].n_input_copies, 0);
  EXPECT_EQ(sched.splits()[1].waits_for, std::vector<int>{0});
  std::vector<float> xs(32);
  for (int i = 0; i < 32; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(i);
  tensor_set(*x, xs.data(), 0, x->nbytes());
  sched.compute(g);
  const auto out = read(*b);
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(out[static_cast<size_t>(r * 4 + c)], 2.0f * (c * 8 + r) + 2.0f * 1);
    }
  }
}

// An input that two splits of a device with memory of its own read (as
// every layer's split on a worker reads the attention mask) is copied to
// it once: the second split reads the first's copy. A tensor written again
// in between is copied again (the copy must hold the new bytes).
TEST(SchedulerCopies, AnInputGoesToADeviceOncePerGraph) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.isolated_memory = true;
  ao.random_delay_ms = 1;
  auto async = make_async_device(ao);
  auto cb = cpu->create_backend();
  auto ab = async->create_backend();
  Scheduler sched({cb.get(), ab.get()});
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {64});
  x->flags |= kFlagInput;
  Tensor* s1 = ops::silu(ctx, x);           // async: copies x
  Tensor* c = ops::sqr(ctx, s1);            // CPU: copies s1 back
  Tensor* d = ops::add(ctx, c, x);          // async: copies c, reads its copy of x again
  Tensor* y = ops::cpy(ctx, d, x);          // CPU: writes x anew (d copied back)
  Tensor* e = ops::mul(ctx, ops::silu(ctx, d), y);  // async: x's new bytes copied again
  Graph g;
  g.expand(e);
  for (Tensor* t : g.nodes()) sched.set_backend(*t, t == c || t == y ? *cb : *ab);
  sched.allocate(g);
  ASSERT_EQ(sched.splits().size(), 5u);
  EXPECT_EQ(sched.splits()[0].n_input_copies, 1);  // x
  EXPECT_EQ(sched.splits()[2].n_input_copies, 1);  // c only: x's copy is split 0's
  EXPECT_EQ(sched.splits()[4].n_input_copies, 1);  // x as y rewrote it
  std::vector<float> xs(64);
  for (int i = 0; i < 64; ++i) xs[static_cast<size_t>(i)] = 0.05f * static_cast<float>(i - 32);
  for (int run = 0; run < 3; ++run) {
    tensor_set(*x, xs.data(), 0, x->nbytes());
    sched.compute(g);
    const auto got = read(*e);
    for (size_t i = 0; i < 64; ++i) {
      const double v = xs[i], silu_v = v / (1 + std::exp(-v));
      const double dv = silu_v * silu_v + v;
      const double want = dv / (1 + std::exp(-dv)) * dv;
      EXPECT_NEAR(got[i], want, 1e-5 * (1 + std::fabs(want))) << "run " << run << ", element " << i;
    }
  }
}

}  // namespace
}  // namespace weft
