// Whole graphs through the scheduler: pipelined micro-batches give the same
// results as one at a time, and random graphs split over several backends
// give the results of the CPU alone.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "tensor_read.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/ops.h"
#include "weft/testing/async.h"

namespace weft {
namespace {

using test::read;

void fill(Tensor& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  for (float& x : v) x = dist(rng);
  tensor_set(t, v.data(), 0, t.nbytes());
}

// One micro-batch of a three-split pipeline: async, CPU, async.
struct MicroBatch {
  Context ctx;
  Graph graph;
  Tensor* x = nullptr;
  Tensor* z = nullptr;
};

std::vector<std::vector<float>> run_pipeline(int n_copies, int n_batches) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.random_delay_ms = 2;
  ao.seed = 11;
  auto async = make_async_device(ao);
  auto cb = cpu->create_backend();
  auto ab = async->create_backend();

  Context wctx;
  Tensor* w1 = wctx.new_tensor(DType::f32, {32, 32});
  Tensor* w2 = wctx.new_tensor(DType::f16, {32, 16});
  Tensor* ws[] = {w1, w2};
  auto weights = allocate_tensors(cpu->default_buffer_type(), ws);
  std::mt19937 wrng(5);
  fill(*w1, wrng);
  std::vector<uint16_t> halves(32 * 16, f32_to_f16(0.25f));
  tensor_set(*w2, halves.data(), 0, w2->nbytes());
  for (Tensor* w : ws) w->flags |= kFlagWeight;

  SchedulerOptions so;
  so.n_copies = n_copies;
  Scheduler sched({ab.get(), cb.get()}, so);
  std::vector<std::unique_ptr<MicroBatch>> in_flight(static_cast<size_t>(n_batches));
  std::vector<std::vector<float>> out(static_cast<size_t>(n_batches));
  std::mt19937 rng(99);
  for (int k = 0; k < n_batches + n_copies; ++k) {
    if (k >= n_copies) {  // the memory set is about to be reused: collect its result
      MicroBatch& done = *in_flight[static_cast<size_t>(k - n_copies)];
      sched.wait(done.graph);
      out[static_cast<size_t>(k - n_copies)] = read(*done.z);
      in_flight[static_cast<size_t>(k - n_copies)].reset();
    }
    if (k >= n_batches) continue;
    auto mb = std::make_unique<MicroBatch>();
    mb->x = mb->ctx.new_tensor(DType::f32, {32, 4});
    mb->x->flags |= kFlagInput;
    Tensor* h = ops::silu(mb->ctx, ops::mul_mat(mb->ctx, w1, mb->x));
    Tensor* y = ops::mul_mat(mb->ctx, w2, h);
    mb->z = ops::add(mb->ctx, ops::scale(mb->ctx, y, 0.5f), ops::sum_rows(mb->ctx, y));
    mb->z->flags |= kFlagOutput;
    mb->graph.expand(mb->z);
    for (Tensor* n : mb->graph.nodes()) sched.set_backend(*n, n == y ? *cb : *ab);
    sched.allocate(mb->graph);
    EXPECT_EQ(sched.splits().size(), 3u);
    fill(*mb->x, rng);
    sched.compute_async(mb->graph);
    in_flight[static_cast<size_t>(k)] = std::move(mb);
  }
  sched.synchronize();
  return out;
}

TEST(SchedulerPipeline, CopiesGiveTheSameResultsAsOne) {
  const auto one = run_pipeline(1, 100);
  for (const auto& r : one) ASSERT_EQ(r.size(), 64u);
  EXPECT_EQ(run_pipeline(2, 100), one);
  EXPECT_EQ(run_pipeline(4, 100), one);
}

// A run of one backend's nodes is cut before a node that reads another
// backend's result the nodes before it do not read: those nodes are a split
// that waits for nothing, so they run while the other backend works (an
// expert split's own slice beside a worker's). The result is the CPU's alone.
TEST(SchedulerSplits, ARunIsCutWhereItFirstReadsAnotherBackend) {
  auto cpu = make_cpu_device(1);
  AsyncOptions ao;
  ao.random_delay_ms = 2;
  auto async = make_async_device(ao);
  auto cb = cpu->create_backend();
  auto ab = async->create_backend();
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {32, 4});
  x->flags |= kFlagInput;
  Tensor* w = ctx.new_tensor(DType::f32, {32, 32});
  w->flags |= kFlagInput;
  Tensor* far = ops::mul_mat(ctx, w, x);              // on the async device
  Tensor* near = ops::silu(ctx, ops::scale(ctx, x, 2.0f));  // on the CPU, reads only x
  Tensor* sum = ops::add(ctx, far, near);             // on the CPU, reads both
  sum->flags |= kFlagOutput;
  Graph g;
  g.expand(sum);
  ASSERT_EQ(g.nodes().front(), far);  // the async node comes first
  Scheduler sched({ab.get(), cb.get()});
  for (Tensor* n : g.nodes()) sched.set_backend(*n, n == far ? *ab : *cb);
  sched.allocate(g);
  const auto& splits = sched.splits();
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(splits[0].backend, 0);
  EXPECT_EQ(splits[1].backend, 1);
  EXPECT_TRUE(splits[1].waits_for.empty());  // scale and silu: no wait
  EXPECT_EQ(splits[2].backend, 1);
  EXPECT_EQ(splits[2].waits_for, std::vector<int>{0});  // the add waits for the async product
  std::mt19937 rng(3);
  fill(*x, rng);
  fill(*w, rng);
  const std::vector<float> xs = read(*x), ws = read(*w);
  sched.compute(g);
  const std::vector<float> got = read(*sum);
  for (int t = 0; t < 4; ++t)
    for (int m = 0; m < 32; ++m) {
      double dot = 0;
      for (int k = 0; k < 32; ++k) dot += double{ws[static_cast<size_t>(m * 32 + k)]} * xs[static_cast<size_t>(t * 32 + k)];
      const double v = 2.0 * xs[static_cast<size_t>(t * 32 + m)];
      const double want = dot + v / (1.0 + std::exp(-v));
      ASSERT_NEAR(got[static_cast<size_t>(t * 32 + m)], want, 1e-4) << t << "," << m;
    }
}

// A random graph; the same seed builds the same graph.
struct RandomSchedGraph {
  Context ctx;
  Graph graph;
  std::vector<Tensor*> inputs;
  std::vector<Tensor*> outputs;
};

void build_random(RandomSchedGraph& rg, uint32_t seed) {
  std::mt19937 rng(seed);
  Context& ctx = rg.ctx;
  std::vector<Tensor*> pool;
  const int64_t cols[] = {4, 8, 32};
  for (int i = 0; i < 3; ++i) {
    Tensor* t = ctx.new_tensor(DType::f32, {32, cols[rng() % 3]});
    t->flags |= kFlagInput;
    rg.inputs.push_back(t);
    pool.push_back(t);
  }
  Tensor* w = ctx.new_tensor(DType::f32, {32, 32});
  w->flags |= kFlagInput;
  rg.inputs.push_back(w);
  const int n_ops = 4 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n_ops; ++i) {
    Tensor* a = pool[rng() % pool.size()];
    Tensor* b = pool[rng() % pool.size()];
    Tensor* r = nullptr;
    switch (rng() % 8) {
      case 0: r = ops::silu(ctx, a); break;
      case 1: r = ops::mul_mat(ctx, w, a); break;
      case 2: r = a->ne[1] == b->ne[1] ? ops::add(ctx, a, b) : ops::mul(ctx, a, ops::view_2d(ctx, b, 32, 1, b->nb[1], 0)); break;
      case 3: r = ops::rms_norm(ctx, a, 1e-5f); break;
      case 4: r = ops::soft_max(ctx, ops::scale(ctx, a, 0.7f), nullptr, 1.0f); break;
      case 5: r = ops::cont(ctx, ops::transpose(ctx, ops::cont(ctx, ops::transpose(ctx, a)))); break;
      case 6: r = a->ne[1] + b->ne[1] <= 64 ? ops::concat(ctx, a, b, 1) : ops::sqr(ctx, a); break;
      default: r = ops::add(ctx, a, ops::sum_rows(ctx, ops::view_2d(ctx, a, 1, a->ne[1], a->nb[1], 0))); break;
    }
    pool.push_back(r);
    if (rng() % 3 == 0) rg.outputs.push_back(r);
  }
  rg.outputs.push_back(pool.back());
  for (Tensor* o : rg.outputs) {
    o->flags |= kFlagOutput;
    rg.graph.expand(o);
  }
  for (Tensor* in : rg.inputs) rg.graph.expand(in);  // an unused input still gets memory
}

TEST(SchedulerRandom, RandomGraphsMatchTheCpuAlone) {
  auto cpu = make_cpu_device(1);
  AsyncOptions own;
  own.random_delay_ms = 0.3;
  own.seed = 3;
  auto async_own = make_async_device(own);  // its own buffers
  AsyncOptions shared = own;
  shared.seed = 4;
  shared.shared_buffer_type = &cpu->default_buffer_type();  // shares the CPU's buffer
  auto async_shared = make_async_device(shared);
  auto cb = cpu->create_backend();
  auto ab1 = async_own->create_backend();
  auto ab2 = async_shared->create_backend();
  auto reference_backend = cpu->create_backend();

  AsyncOptions isolated = own;
  isolated.seed = 5;
  isolated.isolated_memory = true;  // like a GPU: inputs are copied in and out
  auto async_isolated = make_async_device(isolated);
  auto ab3 = async_isolated->create_backend();

  const std::vector<std::vector<Backend*>> sets = {
      {ab1.get(), cb.get()},
      {ab2.get(), ab1.get(), cb.get()},
      {ab3.get(), cb.get(), ab2.get()},
  };
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  for (const auto& set : sets) schedulers.push_back(std::make_unique<Scheduler>(set));
  constexpr int kGraphs = 1000;
  int multi_split = 0, with_copies = 0;
  for (int i = 0; i < kGraphs; ++i) {
    Scheduler& sched = *schedulers[static_cast<size_t>(i) % sets.size()];
    const std::vector<Backend*>& backends = sets[static_cast<size_t>(i) % sets.size()];
    std::mt19937 pick(static_cast<uint32_t>(i) * 7919u);

    RandomSchedGraph ref;
    build_random(ref, static_cast<uint32_t>(i));
    std::vector<Tensor*> all(ref.graph.leafs().begin(), ref.graph.leafs().end());
    all.insert(all.end(), ref.graph.nodes().begin(), ref.graph.nodes().end());
    auto ref_buffer = allocate_tensors(cpu->default_buffer_type(), all);

    RandomSchedGraph rg;
    build_random(rg, static_cast<uint32_t>(i));
    for (Tensor* n : rg.graph.nodes()) {
      if (pick() % 2) sched.set_backend(*n, *backends[pick() % backends.size()]);
    }
    sched.allocate(rg.graph);
    if (sched.splits().size() > 1) ++multi_split;
    for (const SplitInfo& split : sched.splits()) with_copies += split.n_input_copies > 0;
    std::mt19937 data_a(static_cast<uint32_t>(i)), data_b(static_cast<uint32_t>(i));
    for (size_t k = 0; k < rg.inputs.size(); ++k) {
      fill(*ref.inputs[k], data_a);
      fill(*rg.inputs[k], data_b);
    }
    reference_backend->compute(ref.graph);
    sched.compute(rg.graph);
    for (size_t k = 0; k < rg.outputs.size(); ++k) {
      const auto want = read(*ref.outputs[k]);
      const auto got = read(*rg.outputs[k]);
      for (size_t e = 0; e < want.size(); ++e) {
        ASSERT_NEAR(got[e], want[e], 1e-5f * (1 + std::fabs(want[e])))
            << "graph " << i << " output " << k << " element " << e << " (" << sched.splits().size() << " splits)";
      }
    }
  }
  EXPECT_GT(multi_split, kGraphs / 2);
  EXPECT_GT(with_copies, kGraphs / 4);
}

}  // namespace
}  // namespace weft
