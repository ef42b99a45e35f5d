// The async device and its backend: an in-order stream whose work (CPU math
// and memory copies) runs on a worker thread of its own.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "async_buffer.h"
#include "async_event.h"
#include "async_stream.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/splitmix64.h"
#include "weft/testing/async.h"

namespace weft::async {
namespace {

struct DelayPlan {
  double fixed_ms = 0;
  double random_ms = 0;
};

// The bytes [offset, offset + size) of t's host memory; throws when t is not
// in a host buffer or the range is outside it.
// t's bytes, which the stream of device `own` can reach: host memory, or
// own's memory (which is host memory underneath even when isolated).
uint8_t* host_bytes(const Tensor& t, size_t offset, size_t size, const char* what, Device& own) {
  if (t.buffer == nullptr || t.data == nullptr)
    fail(ErrorKind::invalid_input, what, "tensor '" + t.name + "' has no buffer");
  if (!t.buffer->type().is_host() && &t.buffer->type().device() != &own) {
    fail(ErrorKind::unsupported, what,
         "tensor '" + t.name + "' is in non-host buffer type '" + t.buffer->type().name() + "'");
  }
  const size_t n = t.nbytes();
  if (offset > n || size > n - offset) {
    fail(ErrorKind::invalid_input, what,
         "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside " + shape_string(t) + " '" +
             t.name + "' (" + std::to_string(n) + " bytes)");
  }
  return static_cast<uint8_t*>(t.data) + offset;
}

// Whether a stream of device d can memmove t: host memory, or d's own.
bool accessible(const Tensor& t, Device& d) {
  return t.buffer != nullptr && t.data != nullptr && t.is_contiguous() &&
         (t.buffer->type().is_host() || &t.buffer->type().device() == &d);
}

// Every compute window of a device's backends, in the order they ended.
struct DeviceComputeLog {
  std::mutex mu;
  std::vector<ComputeWindow> windows;
};

// One stream. Every call enqueues and returns; the worker runs the queue in
// order. math_, rng_ are touched only by the worker; log_ is under
// log_mutex_. Destroying the backend runs what is still queued first.
class AsyncBackend final : public Backend {
 public:
  AsyncBackend(Device& device, DeviceComputeLog& device_log, std::unique_ptr<Backend> math, DelayPlan delay,
               uint64_t seed)
      : device_(device), device_log_(device_log), math_(std::move(math)), delay_(delay), rng_(seed) {}
  AsyncBackend(const AsyncBackend&) = delete;
  AsyncBackend& operator=(const AsyncBackend&) = delete;

  std::string name() const override { return device_.name(); }
  Device& device() override { return device_; }

  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override {
    uint8_t* dst = host_bytes(t, offset, size, "async set_tensor", device());
    if (size == 0) return;
    stream_.enqueue([dst, data, size] { std::memcpy(dst, data, size); });
  }

  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override {
    const uint8_t* src = host_bytes(t, offset, size, "async get_tensor", device());
    if (size == 0) return;
    stream_.enqueue([src, data, size] { std::memcpy(data, src, size); });
  }

  // Host to host only. The copy reads src when this stream gets to it and
  // does not wait for src_backend: like a GPU upload, ordering it after
  // src's producer is the caller's job (event wait or synchronize).
  bool copy_tensor_async(Backend& src_backend, const Tensor& src, Tensor& dst) override {
    (void)src_backend;
    if (!accessible(src, device()) || !accessible(dst, device()) || src.nbytes() != dst.nbytes()) return false;
    const size_t n = src.nbytes();
    if (n == 0) return true;
    const void* from = src.data;
    void* to = dst.data;
    stream_.enqueue([to, from, n] { std::memmove(to, from, n); });
    return true;
  }

  // The Graph is copied; its tensors must outlive the work.
  void compute(const Graph& g) override {
    stream_.enqueue([this, graph = g] { run_compute(graph); });
  }

  void synchronize() override {
    stream_.drain();
    if (std::exception_ptr error = stream_.take_error()) std::rethrow_exception(error);
  }

  void record_event(Event& e) override {
    std::shared_ptr<EventState> state = own_event(e, "async record_event").state();
    const uint64_t ticket = state->new_record();
    try {
      stream_.enqueue([state, ticket] { state->reach(ticket); });
    } catch (...) {
      state->reach(ticket);  // never leave a ticket nobody will reach
      throw;
    }
  }

  void wait_event(Event& e) override {
    std::shared_ptr<EventState> state = own_event(e, "async wait_event").state();
    const uint64_t ticket = state->latest();
    if (ticket == 0) return;  // never recorded: counts as reached
    stream_.enqueue([state, ticket] { state->wait(ticket); });
  }

  std::vector<ComputeWindow> compute_log() const {
    std::lock_guard<std::mutex> lock(log_mutex_);
    return log_;
  }

 private:
  // Events are recorded and waited on only by backends of the device that
  // made them (architecture, scheduler rule 3).
  AsyncEvent& own_event(Event& e, const char* what) {
    auto* event = dynamic_cast<AsyncEvent*>(&e);
    if (event == nullptr || &event->device() != &device_) {
      fail(ErrorKind::invalid_input, what,
           "the event was made by device '" + e.device().name() + "', not '" + device_.name() + "'");
    }
    return *event;
  }

  // Worker thread only.
  double next_delay_ms() {
    double ms = delay_.fixed_ms;
    if (delay_.random_ms > 0) ms += delay_.random_ms * static_cast<double>(splitmix64(rng_) >> 11) * 0x1.0p-53;
    return ms;
  }

  // Worker thread only. The delay stands for device time, so the logged
  // window covers it; a failed compute is logged too, then rethrown.
  void run_compute(const Graph& graph) {
    const double delay_ms = next_delay_ms();
    const Clock::time_point start = Clock::now();
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    std::exception_ptr error;
    try {
      math_->compute(graph);
      math_->synchronize();
    } catch (...) {
      error = std::current_exception();
    }
    const Clock::time_point end = Clock::now();
    {
      std::lock_guard<std::mutex> lock(log_mutex_);
      log_.push_back({start, end});
    }
    {
      std::lock_guard<std::mutex> lock(device_log_.mu);
      device_log_.windows.push_back({start, end});
    }
    if (error) std::rethrow_exception(error);
  }

  Device& device_;
  DeviceComputeLog& device_log_;   // the device's, which outlives its backends
  std::unique_ptr<Backend> math_;  // a CPU backend, driven from the worker
  const DelayPlan delay_;
  uint64_t rng_;
  mutable std::mutex log_mutex_;
  std::vector<ComputeWindow> log_;
  Stream stream_;  // last: destroyed first, so queued work finishes while the members above live
};

std::string format_ms(double ms) {
  std::ostringstream s;
  s << ms << " ms";
  return s.str();
}

// Owns an inner CPU device for the math and host memory. Thread-safe: the
// backend counter is atomic and everything else is fixed at construction.
class AsyncDevice final : public Device {
 public:
  explicit AsyncDevice(const AsyncOptions& options)
      : options_(options),
        cpu_(make_cpu_device(options.n_threads)),
        host_type_(*this, cpu_->default_buffer_type(), options.name + "_host", !options.isolated_memory) {}
  AsyncDevice(const AsyncDevice&) = delete;
  AsyncDevice& operator=(const AsyncDevice&) = delete;

  std::string name() const override { return options_.name; }
  std::string description() const override {
    return "asynchronous test stream over CPU math (" + cpu_->description() + "), delay " +
           format_ms(options_.delay_ms) + " + up to " + format_ms(options_.random_delay_ms);
  }
  // gpu, not cpu: the device stands in for a GPU stream (async calls, events,
  // work that finishes after the call returns). Callers that treat the cpu
  // kind as the synchronous host fallback must not treat this one so.
  DeviceKind kind() const override { return DeviceKind::gpu; }
  MemoryInfo memory() const override { return cpu_->memory(); }
  BufferType& default_buffer_type() override {
    return options_.shared_buffer_type != nullptr ? *options_.shared_buffer_type : host_type_;
  }
  bool supports_op(const Tensor& t) const override { return cpu_->supports_op(t); }
  bool supports_buffer_type(const BufferType& bt) const override {
    return options_.isolated_memory ? &bt == &host_type_ : bt.is_host();
  }

  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override {
    BackendOptions math;
    math.n_threads = options.n_threads > 0 ? options.n_threads : options_.n_threads;
    if (math.n_threads < 0) math.n_threads = 0;  // the inner device's default
    // Backend k draws its delays from its own stream, seeded by (seed, k).
    uint64_t seed = options_.seed ^ (next_backend_.fetch_add(1) * 0xd1b54a32d192ed03ull);
    return std::make_unique<AsyncBackend>(*this, log_, cpu_->create_backend(math),
                                          DelayPlan{options_.delay_ms, options_.random_delay_ms}, splitmix64(seed));
  }

  std::unique_ptr<Event> create_event() override { return std::make_unique<AsyncEvent>(*this); }

  std::vector<ComputeWindow> compute_log() {
    std::lock_guard<std::mutex> lock(log_.mu);
    return log_.windows;
  }

 private:
  const AsyncOptions options_;
  std::unique_ptr<Device> cpu_;  // declared before host_type_, which refers to it
  HostBufferType host_type_;
  std::atomic<uint64_t> next_backend_{0};
  DeviceComputeLog log_;
};

}  // namespace
}  // namespace weft::async

namespace weft {

std::unique_ptr<Device> make_async_device(const AsyncOptions& options) {
  if (options.shared_buffer_type != nullptr && !options.shared_buffer_type->is_host()) {
    fail(ErrorKind::invalid_input, "make_async_device",
         "shared buffer type '" + options.shared_buffer_type->name() + "' is not host memory");
  }
  if (options.shared_buffer_type != nullptr && options.isolated_memory) {
    fail(ErrorKind::invalid_input, "make_async_device", "isolated memory cannot share another buffer type");
  }
  if (!(options.delay_ms >= 0) || !(options.random_delay_ms >= 0)) {
    fail(ErrorKind::invalid_input, "make_async_device",
         "delays must be >= 0 (delay_ms " + std::to_string(options.delay_ms) + ", random_delay_ms " +
             std::to_string(options.random_delay_ms) + ")");
  }
  return std::make_unique<async::AsyncDevice>(options);
}

std::optional<std::chrono::steady_clock::time_point> async_event_time(Event& e) {
  auto* event = dynamic_cast<async::AsyncEvent*>(&e);
  if (event == nullptr) {
    fail(ErrorKind::invalid_input, "async_event_time",
         "the event of device '" + e.device().name() + "' is not an async event");
  }
  return event->state()->latest_time();
}

std::vector<ComputeWindow> async_compute_log(Backend& b) {
  auto* backend = dynamic_cast<async::AsyncBackend*>(&b);
  if (backend == nullptr) {
    fail(ErrorKind::invalid_input, "async_compute_log", "backend '" + b.name() + "' is not an async backend");
  }
  return backend->compute_log();
}

double compute_overlap_seconds(const std::vector<ComputeWindow>& a, const std::vector<ComputeWindow>& b) {
  double seconds = 0;
  for (const ComputeWindow& x : a)
    for (const ComputeWindow& y : b) {
      const auto from = std::max(x.start, y.start), to = std::min(x.end, y.end);
      if (from < to) seconds += std::chrono::duration<double>(to - from).count();
    }
  return seconds;
}

std::vector<ComputeWindow> async_device_compute_log(Device& d) {
  auto* device = dynamic_cast<async::AsyncDevice*>(&d);
  if (device == nullptr)
    fail(ErrorKind::invalid_input, "async_device_compute_log", "device '" + d.name() + "' is not an async device");
  return device->compute_log();
}

}  // namespace weft
