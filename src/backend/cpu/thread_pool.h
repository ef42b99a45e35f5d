// A persistent pool of threads for running one graph at a time. Threads are
// created once and reused for every graph; the calling thread takes part as
// thread 0. Not reentrant: run() is called by one thread at a time (the CPU
// backend's stream), never from inside a task.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs task(ith, nth) on every thread and returns when all have finished.
  // If a task throws, the first exception is rethrown here after all finish;
  // a task that may throw between barrier() calls must catch and keep
  // calling barrier() the same number of times (or the others wait forever).
  void run(const std::function<void(int ith, int nth)>& task);

  // Called from inside a task by all nth threads: returns when all arrived.
  void barrier();

 private:
  void worker_loop(int ith);
  void run_task(int ith);

  const int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped under mutex_ for each run()
  bool stopping_ = false;
  int running_ = 0;          // workers still in the current task
  const std::function<void(int, int)>* task_ = nullptr;
  std::exception_ptr error_;

  // Sense-reversing spin barrier.
  std::atomic<int> barrier_count_{0};
  std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace weft::cpu
