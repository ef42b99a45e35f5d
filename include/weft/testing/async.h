// The asynchronous test device. It stands in for a GPU stream: its backends
// do CPU math on their own worker thread, every Backend call only enqueues
// work and returns at once, and an injected delay before each compute makes
// ordering bugs (a missing event wait, memory reused too early) show up on
// any machine instead of only on real hardware.
//
//   AsyncOptions o;
//   o.delay_ms = 20;                                  // every compute is slow
//   auto dev = weft::make_async_device(o);
//   auto backend = dev->create_backend();
//   auto buf = allocate_tensors(dev->default_buffer_type(), tensors);
//   backend->set_tensor_async(*x, host_x, 0, x->nbytes());  // host_x must stay valid...
//   backend->compute(graph);                          // returns at once
//   backend->get_tensor_async(*y, host_y, 0, y->nbytes());
//   backend->synchronize();                           // ...until here; task errors rethrown here
//
// Semantics (those of a GPU stream):
// - Work on one backend runs in submission order on that backend's worker;
//   backends run concurrently with each other (one worker thread each).
// - set/get/copy capture the tensor's data pointer when called; the host
//   memory passed in, the tensors' metadata and their buffers must stay valid
//   and untouched until synchronize() or an event says the work is done.
//   compute() copies the Graph object, so only the tensors must live on.
// - copy_tensor_async reads src whenever the stream gets to it, without
//   waiting for src's backend: ordering that is the caller's job.
// - An error in a task never ends the process: the first one is kept and
//   rethrown by the next synchronize() (which clears it); later tasks still
//   run, so events are still reached and waiters are never stranded.
// - Events: record = "mark reached when the stream gets here"; a wait blocks
//   the waiting stream until the latest record made before the wait call is
//   reached. An event never recorded counts as reached.
// Backend methods may be called from several threads; work from one calling
// thread runs in call order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/backend/backend.h"

namespace weft {

struct AsyncOptions {
  int n_threads = 1;           // CPU threads used by the math (<= 0: all hardware threads)
  double delay_ms = 0;         // sleep before each compute
  double random_delay_ms = 0;  // plus a uniform random extra in [0, random_delay_ms]
  uint64_t seed = 1;           // backend k of a device draws from a stream seeded by (seed, k)
  // If set, the device's default buffer type IS this one (e.g. the CPU's), so
  // the scheduler puts both backends' tensors in one physical buffer (that is
  // how the memory-reuse race is reproduced). It must be a host buffer type
  // and outlive the device. If null, the device has its own host buffer type
  // (a distinct object whose device() is this device, is_host() true).
  BufferType* shared_buffer_type = nullptr;
  // Like a GPU's memory: the device's own buffer type is not host memory
  // (is_host() false) and the device reads no other buffer type, so the
  // scheduler must copy inputs in and results out. Not with shared_buffer_type.
  bool isolated_memory = false;
  std::string name = "async";
};

// Throws Error(invalid_input) for a shared_buffer_type that is not host
// memory, isolated_memory together with a shared_buffer_type, or a negative
// delay.
std::unique_ptr<Device> make_async_device(const AsyncOptions& options = {});

// Test instrumentation. The event must come from an async device, and the
// backend must be an async backend; otherwise Error(invalid_input).
//
// When a stream reached the event's latest record() (steady_clock), or
// nullopt if that record is not reached yet or the event was never recorded.
std::optional<std::chrono::steady_clock::time_point> async_event_time(Event& e);

// Start and end of each compute the backend ran, in order (for overlap
// tests). The injected delay is part of the window: it stands for the time
// the device spends on the work.
struct ComputeWindow {
  std::chrono::steady_clock::time_point start, end;
};
std::vector<ComputeWindow> async_compute_log(Backend& b);
// The same over every backend the device made, even those since destroyed
// (a worker's, made and ended inside it), in the order they ended.
std::vector<ComputeWindow> async_device_compute_log(Device& d);
// How long two devices computed at the same time: the summed intersections
// of every window of a with every window of b, in seconds.
double compute_overlap_seconds(const std::vector<ComputeWindow>& a, const std::vector<ComputeWindow>& b);

}  // namespace weft
