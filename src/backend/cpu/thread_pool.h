// A persistent pool of threads for running one graph at a time. Threads are
// created once and reused for every graph; the calling thread takes part as
// thread 0. Not reentrant: run() is called by one thread at a time (the CPU
// backend's stream), never from inside a task.
//
// Waking: between runs a worker spins on the run counter for up to
// kSpinMicros (a token's host work between two graphs is shorter, so the
// next graph starts without a kernel wake-up), then sleeps on a condition
// variable; an idle pool uses no CPU. The caller waits for the last worker
// the same way. A run allocates nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::cpu {

// A reference to a callable task(ith, nth), valid while the callable lives:
// run() takes it instead of a std::function, which would allocate for a
// capture larger than two pointers.
class TaskRef {
 public:
  template <class F>
  TaskRef(const F& f)  // NOLINT(google-explicit-constructor): a lambda converts where a task is taken
      : obj_(&f), call_([](const void* o, int ith, int nth) { (*static_cast<const F*>(o))(ith, nth); }) {}
  void operator()(int ith, int nth) const { call_(obj_, ith, nth); }

 private:
  const void* obj_;
  void (*call_)(const void*, int, int);
};

class ThreadPool {
 public:
  // How long an idle worker (and the caller waiting for the workers) spins
  // before it sleeps.
  static constexpr int kSpinMicros = 200;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs task(ith, nth) on every thread and returns when all have finished.
  // If a task throws, the first exception is rethrown here after all finish;
  // a task that may throw between barrier() calls must catch and keep
  // calling barrier() the same number of times (or the others wait forever).
  void run(TaskRef task);

  // Called from inside a task by all nth threads: returns when all arrived.
  void barrier();

 private:
  void worker_loop(int ith);
  void run_task(int ith);
  // Waits until generation_ differs from seen (returns it) or the pool stops
  // (returns seen).
  uint64_t wait_for_run(uint64_t seen);

  const int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;                 // guards the sleeping side and error_
  std::condition_variable wake_;     // workers sleep on it between runs
  std::condition_variable done_cv_;  // the caller sleeps on it until running_ is 0
  std::atomic<uint64_t> generation_{0};  // bumped for each run(); publishes task_
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_{0};  // workers still in the current task
  const TaskRef* task_ = nullptr;
  std::exception_ptr error_;

  // Sense-reversing spin barrier.
  std::atomic<int> barrier_count_{0};
  std::atomic<uint32_t> barrier_phase_{0};
};

}  // namespace weft::cpu
