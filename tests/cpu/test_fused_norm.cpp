// The CPU backend runs rms_norm and the mul by its weight row as one kernel
// when nothing else reads the norm (cpu_device.cpp, ops_norm.cpp): results
// bit-identical to the two nodes run apart, the norm's memory never written
// (a NaN left there proves the fusion ran); not fused when the norm is a
// graph output, has a second reader, or is read by another split of a
// scheduled graph (the scheduler flags it an output of its split).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "tensor_read.h"
#include "weft/backend/alloc.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/core/ops.h"
#include "weft/testing/async.h"

namespace weft {
namespace {

constexpr int64_t kWidth = 72, kRows = 5;  // a width with a vector tail

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

using test::read;

struct NormGraph {
  Context ctx;
  Tensor* x;
  Tensor* w;
  Tensor* norm;
  Tensor* out;
  Tensor* other = nullptr;  // a second reader of norm, when asked
  Graph graph;
  std::unique_ptr<Buffer> buffer;

  // out = silu(rms_norm(x) * w); with second_reader also other = norm + x.
  NormGraph(bool norm_is_output, bool second_reader) {
    x = ctx.new_tensor(DType::f32, {kWidth, kRows});
    w = ctx.new_tensor(DType::f32, {kWidth});
    norm = ops::rms_norm(ctx, x, 1e-5f);
    out = ops::silu(ctx, ops::mul(ctx, norm, w));
    out->flags |= kFlagOutput;
    if (norm_is_output) norm->flags |= kFlagOutput;
    graph.expand(out);
    if (second_reader) {
      other = ops::add(ctx, norm, x);
      other->flags |= kFlagOutput;
      graph.expand(other);
    }
  }

  // Every tensor in its own memory; norm's filled with NaN first.
  void run(Device& device) {
    std::vector<Tensor*> all{x, w};
    all.insert(all.end(), graph.nodes().begin(), graph.nodes().end());
    buffer = allocate_tensors(device.default_buffer_type(), all);
    ASSERT_NE(buffer, nullptr);
    const std::vector<float> xv = random_values(static_cast<size_t>(kWidth * kRows), 1);
    const std::vector<float> wv = random_values(static_cast<size_t>(kWidth), 2);
    tensor_set(*x, xv.data(), 0, x->nbytes());
    tensor_set(*w, wv.data(), 0, w->nbytes());
    const std::vector<float> nan(static_cast<size_t>(norm->nelements()), NAN);
    tensor_set(*norm, nan.data(), 0, norm->nbytes());
    device.create_backend()->compute(graph);
  }
};

bool all_nan(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isnan(x)) return false;
  return true;
}

TEST(FusedNorm, OneKernelBitIdenticalAndTheNormNeverWritten) {
  auto cpu = make_cpu_device(3);
  NormGraph fused(false, false), apart(true, false);
  fused.run(*cpu);
  apart.run(*cpu);
  EXPECT_TRUE(all_nan(read(*fused.norm))) << "the norm was computed: not fused";
  EXPECT_FALSE(all_nan(read(*apart.norm))) << "a graph output was skipped";
  const std::vector<float> a = read(*fused.out), b = read(*apart.out);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "fused results differ from unfused";
}

TEST(FusedNorm, ASecondReaderKeepsTheNorm) {
  auto cpu = make_cpu_device(2);
  NormGraph g(false, true), ref(true, false);
  g.run(*cpu);
  ref.run(*cpu);
  const std::vector<float> n = read(*g.norm), other = read(*g.other), xv = read(*g.x);
  EXPECT_EQ(read(*g.norm), read(*ref.norm));
  for (size_t i = 0; i < n.size(); ++i) ASSERT_EQ(other[i], n[i] + xv[i]) << i;
  EXPECT_EQ(read(*g.out), read(*ref.out));
}

// The norm on the CPU, its second reader pinned to an isolated-memory
// device (a copy of the norm after the CPU's split ran): the CPU split's
// graph holds only the mul as a reader, so only the scheduler's output flag
// keeps the norm computed.
TEST(FusedNorm, AReaderInAnotherSplitKeepsTheNorm) {
  auto cpu = make_cpu_device(2);
  AsyncOptions ao;
  ao.isolated_memory = true;
  auto isolated = make_async_device(ao);
  auto cpu_backend = cpu->create_backend();
  auto iso_backend = isolated->create_backend();
  Scheduler sched({cpu_backend.get(), iso_backend.get()});
  NormGraph g(false, true);
  for (Tensor* t : g.graph.nodes())
    if (t != g.other) sched.set_backend(*t, *cpu_backend);
  sched.set_backend(*g.other, *iso_backend);
  sched.allocate(g.graph);
  const std::vector<float> xv = random_values(static_cast<size_t>(kWidth * kRows), 1);
  const std::vector<float> wv = random_values(static_cast<size_t>(kWidth), 2);
  tensor_set(*g.x, xv.data(), 0, g.x->nbytes());
  tensor_set(*g.w, wv.data(), 0, g.w->nbytes());
  sched.compute(g.graph);
  ASSERT_EQ(sched.backend_of(*g.other), 1);
  NormGraph ref(true, false);
  ref.run(*cpu);
  const std::vector<float> n = read(*ref.norm), other = read(*g.other);
  for (size_t i = 0; i < n.size(); ++i) ASSERT_EQ(other[i], n[i] + xv[i]) << i;
  EXPECT_EQ(read(*g.out), read(*ref.out));
}

}  // namespace
}  // namespace weft
