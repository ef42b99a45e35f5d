// The backend interfaces (after ggml's registry -> device -> backend ->
// buffer type -> buffer stack). Interfaces hold no data; required methods are
// pure virtual, optional ones have a documented default.
//
//   Device& dev = ...;                            // e.g. from make_cpu_device()
//   auto backend = dev.create_backend();
//   auto buf = allocate_tensors(dev.default_buffer_type(), graph_tensors);
//   buf->set_tensor(*x, host_data, 0, x->nbytes());
//   backend->compute(graph);                      // may return before done
//   backend->synchronize();
//   buf->get_tensor(*y, out, 0, y->nbytes());
//
// Lifetimes: a Device outlives the backends, buffer types, buffers and
// events made from it. Buffers, backends and events may be destroyed in any
// order, once the work that uses them is done (after synchronize()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "weft/core/graph.h"
#include "weft/core/tensor.h"

namespace weft {

class Backend;
class BufferType;
class Device;

enum class DeviceKind { cpu, gpu, remote };
enum class BufferUsage { any, weights, compute };

struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};

// A block of device memory. Tensor data pointers inside it are base() +
// offset; for a device that is not the host, base() is an address in that
// device's space and must not be dereferenced here.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual BufferType& type() = 0;
  virtual void* base() = 0;
  virtual size_t size() const = 0;
  // Optional: records what the buffer holds, for placement decisions.
  virtual void set_usage(BufferUsage) {}
  // Binds t to this buffer at t.data (already set); the default does nothing.
  virtual void init_tensor(Tensor& t) { (void)t; }

  // Synchronous access to the bytes [offset, offset + size) of t's data,
  // which must lie within t.nbytes(). t must live in this buffer.
  virtual void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) = 0;
  virtual void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) = 0;
  virtual void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) = 0;
  // Optional: copies src (in any buffer) into dst (in this buffer) when this
  // buffer can do it directly; returns false to ask the caller to go through
  // host memory.
  virtual bool copy_tensor(const Tensor& src, Tensor& dst) {
    (void)src; (void)dst;
    return false;
  }
  virtual void clear(uint8_t value) = 0;
  // Optional: whether get_tensor returns the bytes as they are after all work
  // already submitted to backends of this buffer's device (a worker runs a
  // session's commands in order), so a host reading a result needs no wait
  // for it first. The default: false.
  virtual bool reads_in_stream_order() const { return false; }
  // Optional, with reads_in_stream_order: a get_tensor of all of t started
  // now, in the stream's order (after the work submitted so far), whose
  // bytes finish_read gives later; meanwhile the host may do other work.
  // Returns a ticket, or 0 when it cannot (then get_tensor). A ticket is
  // finished or dropped once, before the buffer goes. The default: 0.
  virtual uint64_t start_read(const Tensor& t) {
    (void)t;
    return 0;
  }
  virtual void finish_read(uint64_t ticket, void* data) {
    (void)ticket;
    (void)data;
  }
  virtual void drop_read(uint64_t ticket) noexcept { (void)ticket; }
};

class BufferType {
 public:
  virtual ~BufferType() = default;
  virtual std::string name() const = 0;
  virtual Device& device() = 0;
  virtual size_t alignment() const = 0;
  virtual size_t max_size() const { return SIZE_MAX; }
  // Bytes to reserve for t; the default is t.nbytes().
  virtual size_t alloc_size(const Tensor& t) const { return t.nbytes(); }
  virtual bool is_host() const = 0;
  // Throws Error(out_of_memory) when it cannot.
  virtual std::unique_ptr<Buffer> allocate(size_t size) = 0;
};

// Made by a Device; recorded and waited on only by backends of that device.
// A wait covers the latest record() made before the wait was issued; an
// event never recorded counts as done.
class Event {
 public:
  virtual ~Event() = default;
  virtual Device& device() = 0;
  // Blocks until the work before the latest record() is done.
  virtual void synchronize() = 0;
};

// One in-order stream of work on a device. Work submitted to one Backend
// runs in submission order; different Backends may run concurrently. Memory
// passed to an async call stays valid and untouched by the caller until a
// synchronize() or an event says the call is done.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device& device() = 0;

  // Optional async variants; the defaults are synchronous.
  virtual void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size);
  virtual void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size);
  // Optional: copy src (on src_backend's device) into dst (on this backend's
  // device) without a host round trip; returns false if it cannot. The copy
  // runs in this backend's order and does not wait for src_backend: the
  // caller makes sure src is ready (an event wait) and stays untouched.
  virtual bool copy_tensor_async(Backend& src_backend, const Tensor& src, Tensor& dst) {
    (void)src_backend; (void)src; (void)dst;
    return false;
  }
  // Whether copy_tensor_async reads a source in host memory before it
  // returns (an upload that takes the bytes at once) rather than when this
  // backend's stream gets to it: then nothing of this backend's split is
  // left to wait for before that memory is reused (docs/scheduler.md,
  // rule 2). The default: later.
  virtual bool copy_reads_host_source_at_once() const { return false; }

  // Optional: copies between two backends that need no host wait (workers
  // pushing to each other, docs/rpc-protocol.md section 8). When
  // copies_ordered_from(src_backend), copy_tensor_ordered copies src (in
  // src_backend's memory) into dst (in this backend's) in both streams'
  // order: after all work submitted to src_backend so far is done, and
  // before work submitted to this backend afterwards. It returns false only
  // for a pair of tensors it cannot copy so (the caller then waits and
  // copies another way). The defaults: never.
  virtual bool copies_ordered_from(const Backend& src_backend) const {
    (void)src_backend;
    return false;
  }
  virtual bool copy_tensor_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) {
    (void)src_backend; (void)src; (void)dst;
    return false;
  }
  // The same in two parts, so that the source's part need not wait for the
  // destination's work to be submitted (steps pipelined over workers,
  // Scheduler::compute_head): push_ordered queues the copy out of
  // src_backend now, after all work submitted to it so far, and returns a
  // ticket (0: it cannot, as copy_tensor_ordered's false); dst is not
  // touched until wait_pushed(src_backend, ticket) puts the write of dst
  // into this backend's order, before work submitted to it afterwards.
  // Each ticket is waited for once. The defaults: never.
  virtual uint64_t push_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) {
    (void)src_backend; (void)src; (void)dst;
    return 0;
  }
  virtual void wait_pushed(Backend& src_backend, uint64_t ticket) {
    (void)src_backend; (void)ticket;
  }

  // Runs every node of g in order. May return before the work is done; the
  // tensors of g (not the Graph object itself) must stay valid until then.
  // Errors raised by the work surface here or at synchronize().
  virtual void compute(const Graph& g) = 0;
  virtual void synchronize() = 0;
  // Optional: whether every access to this backend's device memory (its own
  // work, copies into and out of it, the host's set and get) runs in this
  // backend's stream order, as a worker session runs its commands: memory a
  // finished-or-not earlier submission used may be reused by later work
  // without a wait. The default: false.
  virtual bool memory_in_stream_order() const { return false; }
  // Optional: starts whatever submitted work the backend still holds back
  // (a worker's connection gathers a submission's frames into one write).
  // A caller that submitted work and will not block on this process's
  // backends soon calls it; blocking on any of them starts it anyway. The
  // default does nothing.
  virtual void flush() {}

  // Optional: the host memory this backend needs for its own use (kernel
  // scratch) to run g, beyond g's tensors. It depends on g alone, so a caller
  // with a memory budget asks once per graph (docs/security.md); the backend
  // keeps the most any graph it ran needed. The default: none.
  virtual size_t working_bytes(const Graph& g) const {
    (void)g;
    return 0;
  }
  // Optional: while flag is set (non-null), compute() reads *flag between
  // nodes and, once it is true, runs no further node and fails with
  // Error(disconnected) "compute cancelled". The flag must outlive the
  // computes that use it. The default ignores it (computes run to the end).
  virtual void set_cancel_flag(const std::atomic<bool>* flag) { (void)flag; }

  // Optional events. The defaults synchronize, which is always correct.
  virtual void record_event(Event& e) { (void)e; synchronize(); }
  virtual void wait_event(Event& e) { e.synchronize(); }
};

struct BackendOptions {
  int n_threads = 0;  // 0: the device's default
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual MemoryInfo memory() const = 0;
  virtual BufferType& default_buffer_type() = 0;
  // Whether this device computes t (its op, dtypes and shapes) correctly.
  // A remote device asks its worker (once per shape class, then cached on
  // the connection), so it may throw Error(disconnected) like any call that
  // reaches a worker.
  virtual bool supports_op(const Tensor& t) const = 0;
  // Whether backends of this device can read tensors in buffers of type bt.
  virtual bool supports_buffer_type(const BufferType& bt) const = 0;
  virtual std::unique_ptr<Backend> create_backend(const BackendOptions& options = {}) = 0;
  // Optional: nullptr when the device has no events (callers synchronize).
  virtual std::unique_ptr<Event> create_event() { return nullptr; }
};

// Shared helpers.

// Allocates one buffer of type bt holding every tensor in tensors that has
// no buffer yet and is not a view, at aligned offsets, and binds views to
// their sources' memory. Returns nullptr when nothing needed memory.
std::unique_ptr<Buffer> allocate_tensors(BufferType& bt, std::span<Tensor* const> tensors);
// Points t (and nothing else) at buffer memory: t.buffer = &buf,
// t.data = base + offset. Checks that t fits.
void bind_tensor(Tensor& t, Buffer& buf, size_t offset);
// Sets view tensors' buffer and data from their view_src (which must be bound).
void bind_view(Tensor& t);
// A read-only buffer of host type `type` over size bytes at base that
// something else owns (a mapped model file: GgufFile::mapping()): tensors
// are bound into it in place (bind_tensor), nothing is copied. keep_alive is
// held for the buffer's life. Reads work as for any host buffer; writes
// (set_tensor, memset_tensor, clear) throw Error(invalid_input). Tensors in
// it are aligned as the memory is (a GGUF file: 32 bytes), possibly below
// type.alignment(), which only places new allocations. Throws
// Error(invalid_input) when the type is not host memory.
std::unique_ptr<Buffer> wrap_host_memory(BufferType& type, std::shared_ptr<const void> keep_alive, const void* base,
                                         size_t size);

// Convenience wrappers that check bounds and find the tensor's buffer.
void tensor_set(Tensor& t, const void* data, size_t offset, size_t size);
void tensor_get(const Tensor& t, void* data, size_t offset, size_t size);

}  // namespace weft
