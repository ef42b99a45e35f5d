#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace weft::cpu {
namespace {

TEST(ThreadPool, EveryThreadRunsAndBarriersOrderPhases) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    std::vector<int> slots(static_cast<size_t>(n), 0);
    std::atomic<int> errors{0};
    for (int round = 0; round < 50; ++round) {
      pool.run([&](int ith, int nth) {
        ASSERT_EQ(nth, n);
        slots[static_cast<size_t>(ith)] = round;
        pool.barrier();
        for (int v : slots) {  // after the barrier every thread sees every write
          if (v != round) ++errors;
        }
        pool.barrier();
      });
    }
    EXPECT_EQ(errors.load(), 0) << n << " threads";
  }
}

TEST(ThreadPool, ReusesItsThreads) {
  ThreadPool pool(3);
  std::vector<std::thread::id> first(3), later(3);
  pool.run([&](int ith, int) { first[static_cast<size_t>(ith)] = std::this_thread::get_id(); });
  pool.run([&](int ith, int) { later[static_cast<size_t>(ith)] = std::this_thread::get_id(); });
  EXPECT_EQ(first, later);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int ith, int) {
    if (ith == 1) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  int ran = 0;
  pool.run([&](int ith, int) {
    if (ith == 0) ++ran;
  });
  EXPECT_EQ(ran, 1);  // still usable
}

}  // namespace
}  // namespace weft::cpu
