#include "thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace weft::cpu {

namespace {

// Spins until done() or kSpinMicros have passed; returns done()'s last value.
template <class Done>
bool spin_until(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
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

void ThreadPool::run(TaskRef task) {
  if (n_threads_ == 1) {
    task(0, 1);
    return;
  }
  task_ = &task;
  running_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the lock: a worker about to sleep either sees the new generation
    // in its wait predicate or is already waiting and gets the notify.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_task(0);
  if (!spin_until([this] { return running_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return running_.load(std::memory_order_acquire) == 0; });
  }
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    task_ = nullptr;
    error.swap(error_);
  }
  if (error) std::rethrow_exception(error);
}

uint64_t ThreadPool::wait_for_run(uint64_t seen) {
  auto changed = [&] {
    return generation_.load(std::memory_order_acquire) != seen || stopping_.load(std::memory_order_acquire);
  };
  if (!spin_until(changed)) {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, changed);
  }
  return stopping_.load(std::memory_order_acquire) ? seen : generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    const uint64_t next = wait_for_run(seen);
    if (next == seen) return;  // stopping
    seen = next;
    run_task(ith);
    if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The last one out: the caller may be asleep. Taking the lock orders
      // this notify after its predicate check.
      { std::lock_guard lock(mutex_); }
      done_cv_.notify_one();
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
