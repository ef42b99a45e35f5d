// The CPU backend's limits: cancelling a compute, the working memory it
// reports before running, and kernel scratch that refuses to overflow.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/bind_graph.h"
#include "scratch.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

struct Bound {
  std::unique_ptr<Device> cpu;
  std::unique_ptr<Buffer> buffer;
};

// The graph's tensors in one host buffer of a CPU device with threads.
Bound bind_all(const Graph& g, int threads) {
  Bound b{make_cpu_device(threads), nullptr};
  b.buffer = weft::testing::bind_graph(*b.cpu, g);
  return b;
}

TEST(CpuBackendLimits, CancelStopsAtTheNextNodeOnEveryThread) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {1024, 8});
  std::vector<Tensor*> chain{x};
  for (int i = 0; i < 50; ++i) chain.push_back(ops::scale(ctx, chain.back(), 2.0f));
  Graph g;
  g.expand(chain.back());
  Bound b = bind_all(g, 3);
  std::fill_n(static_cast<float*>(x->data), 1024 * 8, 1.0f);
  auto backend = b.cpu->create_backend();
  std::atomic<bool> cancel{true};
  backend->set_cancel_flag(&cancel);
  try {
    backend->compute(g);
    ADD_FAILURE() << "a cancelled compute returned normally";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::disconnected) << e.what();
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(static_cast<float*>(chain[1]->data)[8191], 2.0f);  // the first node ran on every thread's rows
  EXPECT_EQ(static_cast<float*>(chain[2]->data)[0], 0.0f);     // the second never started
  cancel = false;
  backend->compute(g);  // and the backend works again
  EXPECT_EQ(static_cast<float*>(chain.back()->data)[5], 1125899906842624.0f);  // 2^50
}

// One mul_mat of about 2^39 multiply-adds (weight rows aliasing one row):
// minutes uncancelled; the product stops within a block of rows.
TEST(CpuBackendLimits, CancelStopsALongMatMulInsideTheNode) {
  Context ctx;
  Tensor* row = ctx.new_tensor(DType::f32, {4096});
  const int64_t ne[] = {4096, 1 << 20};
  const size_t nb[] = {4, 0};
  Tensor* w = ops::view(ctx, row, ne, nb, 0);
  Tensor* x = ctx.new_tensor(DType::f32, {4096, 128});
  Graph g;
  g.expand(ops::mul_mat(ctx, w, x));
  Bound b = bind_all(g, 2);
  auto backend = b.cpu->create_backend();
  std::atomic<bool> cancel{false};
  backend->set_cancel_flag(&cancel);
  // Cancelled once the product is seen running (the process spent a tenth
  // of a second more CPU), not after a guessed sleep.
  auto cpu_seconds = [] {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double before = cpu_seconds();
  std::atomic<double> cancelled_at{0.0};
  std::thread canceller([&] {
    while (cpu_seconds() - before < 0.1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    cancelled_at = cpu_seconds();
    cancel = true;
  });
  EXPECT_THROW(backend->compute(g), Error);
  canceller.join();
  // Measured in CPU time the process spent after the cancel, not wall time:
  // a loaded machine stretches the wall clock, not the work. The whole
  // product is hours of CPU; stopping inside the node costs well under 2 s
  // (a thread finishes the rows it is on).
  const double after_cancel = cpu_seconds() - cancelled_at.load();
  EXPECT_LT(after_cancel, 2.0) << "the product ran " << after_cancel << " CPU s after it was cancelled";
}

TEST(CpuBackendLimits, WorkingBytesCoverTheScratchOfTheGraph) {
  Context ctx;
  Tensor* one = ctx.new_tensor(DType::f32, {1});
  const int64_t ne[] = {1 << 20};
  const size_t nb[] = {0};
  Graph g;
  g.expand(ops::top_k(ctx, ops::view(ctx, one, ne, nb, 0), 1));
  Bound b = bind_all(g, 2);
  auto backend = b.cpu->create_backend();
  // top_k keeps an index and a value per element of the row, on each thread.
  EXPECT_GE(backend->working_bytes(g), size_t{2} * (size_t{8} << 20));
  EXPECT_LT(backend->working_bytes(g), size_t{2} * (size_t{9} << 20));
}

TEST(CpuBackendLimits, ScratchRefusesToHandOutMoreThanItHas) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::f32, {16});
  Tensor* y = ops::silu(ctx, a);
  alignas(64) uint8_t bytes[256];
  const cpu::KernelContext kc{0, 1, bytes, sizeof bytes};
  cpu::RowScratch s1(kc, *y);
  EXPECT_NE(s1.take<float>(32), nullptr);  // 128 bytes
  EXPECT_NE(s1.take<float>(16), nullptr);  // 64 more
  EXPECT_THROW(s1.take<float>(17), Error); // 128 would pass the end
  cpu::AlignedScratch s2(kc, *y);
  EXPECT_NE(s2.take<double>(24), nullptr);
  EXPECT_THROW(s2.take<double>(24), Error);
}

}  // namespace
}  // namespace weft
