// The remote device stack: RemoteDevice -> RemoteBufferType -> RemoteBuffer,
// RemoteBackend and RemoteEvent. Not for callers: they use weft/rpc/client.h.
//
// Who holds the connection (include/weft/rpc/client.h, seeds 000 and 001):
// RemoteDevice and RemoteBufferType hold only the endpoint, the device index
// and properties cached from GET_DEVICES; they take a connection from
// get_connection() when they allocate or create a backend or event.
// RemoteBuffer, RemoteBackend and RemoteEvent hold a shared_ptr to it, so
// they may be freed in any order and the connection closes with the last.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "client/connection.h"
#include "weft/backend/backend.h"
#include "weft/rpc/client.h"

namespace weft::rpc {

class RemoteDevice;

// Why the worker would refuse t whatever its op (element count, alignment):
// a limit of the wire, not of the device, so the client checks it itself;
// empty when it would not (remote_support.cpp).
std::string remote_unsendable(const Tensor& t);

class RemoteBufferType final : public BufferType {
 public:
  RemoteBufferType(RemoteDevice& device, std::string name, size_t alignment, size_t max_size)
      : device_(device), name_(std::move(name)), alignment_(alignment), max_size_(max_size) {}
  std::string name() const override { return name_; }
  Device& device() override;
  size_t alignment() const override { return alignment_; }
  size_t max_size() const override { return max_size_; }
  bool is_host() const override { return false; }
  // ALLOC_BUFFER on a connection from get_connection().
  std::unique_ptr<Buffer> allocate(size_t size) override;

  RemoteDevice& remote_device() const { return device_; }

 private:
  RemoteDevice& device_;
  const std::string name_;
  const size_t alignment_;
  const size_t max_size_;
};

// Memory on the worker, named by a handle. base() is a client-side fake
// address (never dereferenced) from a process-wide range, unique per buffer,
// so that tensor data pointers are base() + offset as for any buffer.
class RemoteBuffer final : public Buffer {
 public:
  RemoteBuffer(RemoteBufferType& type, std::shared_ptr<Connection> connection, uint64_t handle, uintptr_t base,
               size_t size);
  ~RemoteBuffer() override;  // FREE_BUFFER; never throws
  RemoteBuffer(const RemoteBuffer&) = delete;
  RemoteBuffer& operator=(const RemoteBuffer&) = delete;

  BufferType& type() override { return type_; }
  void* base() override { return reinterpret_cast<void*>(base_); }
  size_t size() const override { return size_; }

  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  // Worker-side COPY_TENSOR from a buffer of the same connection, or a
  // pipelined upload from host memory; false otherwise (or for layouts that
  // differ, as the CPU's rule).
  bool copy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;
  // GET_TENSOR runs after every command the session received before it.
  bool reads_in_stream_order() const override { return true; }
  uint64_t start_read(const Tensor& t) override;  // a GET_TENSOR started ahead (Connection::start_get_tensor)
  void finish_read(uint64_t ticket, void* data) override;
  void drop_read(uint64_t ticket) noexcept override;

  uint64_t handle() const { return handle_; }
  const std::shared_ptr<Connection>& connection() const { return connection_; }
  // Where t's data starts in this buffer; checks that t lies inside it.
  uint64_t offset_of(const Tensor& t) const;
  // Uploads with pipelined SET_TENSOR frames (split under the frame limit);
  // try_cache first asks the worker's tensor cache (SET_TENSOR_HASH).
  // later: a small upload may wait for the next frame (Connection::send_later).
  void upload(uint64_t offset, const void* data, size_t size, bool try_cache, bool later = false);
  // Checks [offset_of(t) + offset, + size) and returns its start.
  uint64_t range_of(const Tensor& t, size_t offset, size_t size, const char* what) const;
  // The bytes of one of t's rows when t may travel as its nonzero rows
  // (kFlagSparseRows, packed, rows of 64 bytes or more, RpcOptions::
  // sparse_rows, a 1.7 worker); 0: whole. copy_tensor from host memory and a
  // get_tensor of all of t then use SET_TENSOR_ROWS and GET_TENSOR_ROWS.
  uint64_t sparse_row_bytes(const Tensor& t) const;
  // n_rows rows of row_bytes at offset, from data: SET_TENSOR_ROWS frames
  // carrying the nonzero rows (a piece with none zero goes as SET_TENSOR).
  void upload_rows(uint64_t offset, const uint8_t* data, uint64_t row_bytes, uint64_t n_rows);

 private:
  RemoteBufferType& type_;
  const std::shared_ptr<Connection> connection_;
  const uint64_t handle_;
  const uintptr_t base_;
  const size_t size_;
  const size_t cache_min_bytes_;
  const int hash_threads_;
};

// An event of a worker's device: EVENT_RECORD / EVENT_WAIT / EVENT_SYNC
// under an id this connection reuses once the event is freed.
class RemoteEvent final : public Event {
 public:
  RemoteEvent(RemoteDevice& device, std::shared_ptr<Connection> connection, uint64_t id)
      : device_(device), connection_(std::move(connection)), id_(id) {}
  ~RemoteEvent() override;
  RemoteEvent(const RemoteEvent&) = delete;
  RemoteEvent& operator=(const RemoteEvent&) = delete;

  Device& device() override;
  void synchronize() override;

  const std::shared_ptr<Connection>& connection() const { return connection_; }
  uint64_t id() const { return id_; }
  bool recorded() const { return recorded_.load(); }
  void mark_recorded() { recorded_.store(true); }

 private:
  RemoteDevice& device_;
  const std::shared_ptr<Connection> connection_;
  const uint64_t id_;
  std::atomic<bool> recorded_{false};  // never recorded: counts as done, nothing to ask
};

// One in-order stream of a worker's device. compute() and uploads are
// pipelined (no reply awaited); synchronize() and reads wait.
class RemoteBackend final : public Backend {
 public:
  RemoteBackend(RemoteDevice& device, std::shared_ptr<Connection> connection);
  std::string name() const override;
  Device& device() override;

  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override;
  bool copy_tensor_async(Backend& src_backend, const Tensor& src, Tensor& dst) override;
  bool copy_reads_host_source_at_once() const override { return true; }  // an upload, written before it returns
  // Another worker's backend whose worker and this one both speak peer links
  // (protocol 1.5): the copy is a PUSH_TO_PEER there and a PEER_WAIT here
  // (docs/rpc-protocol.md section 8); the host waits for neither.
  bool copies_ordered_from(const Backend& src_backend) const override;
  bool copy_tensor_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) override;
  uint64_t push_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) override;
  void wait_pushed(Backend& src_backend, uint64_t ticket) override;
  // Encodes g and sends GRAPH_COMPUTE (by id when these bytes were sent
  // before). Throws Error(invalid_input) naming a tensor that is not in a
  // buffer of this connection.
  void compute(const Graph& g) override;
  void synchronize() override;
  void flush() override;
  // A worker session runs every command, the host's reads and writes
  // included, in the order received.
  bool memory_in_stream_order() const override { return true; }
  void record_event(Event& e) override;
  void wait_event(Event& e) override;

 private:
  // t's buffer when it is a RemoteBuffer of this connection, else nullptr.
  RemoteBuffer* own_buffer(const Tensor& t) const;
  RemoteEvent* own_event(Event& e) const;
  // src_backend as a RemoteBackend of another connection that takes peer
  // links, with this one taking them too; else nullptr.
  const RemoteBackend* peer_of(const Backend& src_backend) const;

  RemoteDevice& device_;
  const std::shared_ptr<Connection> connection_;
  const uint32_t index_;
  Writer graph_bytes_;  // compute()'s encoding, kept so a token allocates nothing for it
};

class RemoteDevice final : public Device {
 public:
  RemoteDevice(std::string endpoint, uint32_t index, const RemoteDeviceInfo& info, const RpcOptions& options);

  std::string name() const override;
  std::string description() const override;
  DeviceKind kind() const override { return DeviceKind::remote; }
  // Asks the worker (GET_DEVICES); the cached numbers if it cannot.
  MemoryInfo memory() const override;
  BufferType& default_buffer_type() override { return buffer_type_; }
  // What the protocol can send (remote_unsendable) and, for an op that
  // computes, what the worker's device says (Connection::supports_op, cached
  // per shape class). Views and leafs compute nothing on the worker: true.
  bool supports_op(const Tensor& t) const override;
  // Only this endpoint's buffers of this device.
  bool supports_buffer_type(const BufferType& bt) const override;
  // n_threads is the worker's choice and ignored here.
  std::unique_ptr<Backend> create_backend(const BackendOptions& options = {}) override;
  // nullptr when the worker has no events (or this session's ids are used up).
  std::unique_ptr<Event> create_event() override;

  const std::string& endpoint() const { return endpoint_; }
  uint32_t index() const { return index_; }
  const RpcOptions& options() const { return options_; }
  const RemoteDeviceInfo& info() const { return info_; }
  std::shared_ptr<Connection> connect() const { return get_connection(endpoint_, options_); }

 private:
  const std::string endpoint_;
  const uint32_t index_;
  const RemoteDeviceInfo info_;
  const RpcOptions options_;
  RemoteBufferType buffer_type_;
};

}  // namespace weft::rpc
