#include "thread_pool.h"

#include <immintrin.h>

namespace weft::cpu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_task(int ith) {
  try {
    (*task_)(ith, n_threads_);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& task) {
  if (n_threads_ == 1) {
    task(0, 1);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    error_ = nullptr;
    running_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_task(0);
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return running_ == 0; });
    task_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_task(ith);
    {
      std::lock_guard lock(mutex_);
      if (--running_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::barrier() {
  if (n_threads_ == 1) return;
  const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_phase_.store(phase + 1, std::memory_order_release);
    return;
  }
  // Spin briefly (the common case on an idle machine), then yield so an
  // oversubscribed machine still makes progress.
  for (int spins = 0; barrier_phase_.load(std::memory_order_acquire) == phase; ++spins) {
    if (spins < 4096) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace weft::cpu
