// The worker queue behind an async backend: one thread that runs enqueued
// tasks one at a time, in the order they were enqueued.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace weft::async {

// Thread-safe: enqueue, drain and take_error may be called from any thread
// except the worker itself (a task must not call drain, it would wait for
// itself). Tasks run on the worker thread; an exception a task throws is
// caught there and kept (the first one only) for take_error().
class Stream {
 public:
  Stream();
  // Runs every task still queued, then joins the worker. Never throws; an
  // error nobody took is dropped.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&&) = delete;
  Stream& operator=(Stream&&) = delete;

  // Queues task and returns at once.
  void enqueue(std::function<void()> task);
  // Returns when every task enqueued so far (and any enqueued meanwhile) has run.
  void drain();
  // The first error a task raised since the last call, or null; clears it.
  std::exception_ptr take_error();

 private:
  void worker_loop();

  std::mutex mutex_;
  std::condition_variable work_cv_;  // worker: a task was queued, or stopping
  std::condition_variable idle_cv_;  // drain(): the queue ran dry
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;      // the worker is running a task
  bool stopping_ = false;  // set by the destructor
  std::exception_ptr error_;
  std::thread worker_;  // last: started once the state above exists
};

}  // namespace weft::async
