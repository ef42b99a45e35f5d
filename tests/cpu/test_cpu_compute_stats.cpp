// cpu_compute_stats(): every compute of every CPU backend adds its graph, its
// nodes and its time; a compute that fails still counts; views add nothing.
#include <gtest/gtest.h>

#include <atomic>

#include "cpu/bind_graph.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

TEST(CpuComputeStats, CountsGraphsNodesAndTime) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {4096, 16});
  Tensor* y = ops::scale(ctx, ops::add(ctx, x, x), 0.5f);
  Tensor* v = ops::view_2d(ctx, y, 4096, 8, y->nb[1], 0);  // a view: no work
  Graph g;
  g.expand(ops::sum_rows(ctx, v));
  auto cpu = make_cpu_device(2);
  auto buffer = testing::bind_graph(*cpu, g);
  auto backend = cpu->create_backend();

  const CpuComputeStats before = cpu_compute_stats();
  for (int i = 0; i < 3; ++i) backend->compute(g);
  const CpuComputeStats after = cpu_compute_stats();
  // Other tests of this process run one at a time (gtest), so the totals
  // grew by exactly this test's work.
  EXPECT_EQ(after.graphs - before.graphs, 3u);
  EXPECT_EQ(after.nodes - before.nodes, 3u * 3u);  // add, scale, sum_rows
  EXPECT_GT(after.seconds, before.seconds);
}

TEST(CpuComputeStats, AFailedComputeStillCounts) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {64, 4});
  Graph g;
  g.expand(ops::scale(ctx, x, 2.0f));
  auto cpu = make_cpu_device(1);
  auto buffer = testing::bind_graph(*cpu, g);
  auto backend = cpu->create_backend();
  std::atomic<bool> cancel{true};
  backend->set_cancel_flag(&cancel);
  const CpuComputeStats before = cpu_compute_stats();
  EXPECT_THROW(backend->compute(g), Error);
  EXPECT_EQ(cpu_compute_stats().graphs - before.graphs, 1u);
}

}  // namespace
}  // namespace weft
