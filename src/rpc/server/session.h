// One client connection of a worker (docs/rpc-protocol.md): the handshake,
// then one command at a time, validated in the order of section 6.
//
//   WorkerShared shared{...};            // outlives every session
//   Session s(shared, stream);
//   s.run();                             // returns when the session ends; never throws
//                                        // ~Session frees all it owned
//
// A session owns its buffers (by handle), its decoded graphs, its events and
// one Backend per device it used. Only run()'s thread touches them. What
// sessions share (the devices, the memory budget, the tensor cache, the
// handle counter) is in WorkerShared and thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/content_hash.h"
#include "protocol/graph_codec.h"
#include "protocol/wire.h"
#include "transport/stream.h"
#include "weft/backend.h"
#include "weft/error.h"

namespace weft::rpc {

class TensorCache;

struct WorkerShared {
  std::vector<Device*> devices;  // at most kMaxDevices
  size_t memory_budget = SIZE_MAX;
  TensorCache* cache = nullptr;  // nullptr: no tensor cache
  std::optional<std::string> auth_secret;
  bool log = true;

  std::atomic<size_t> memory_in_use{0};
  std::atomic<uint64_t> next_handle{1};
  std::atomic<bool> stopping{false};  // Worker::stop() is closing every session  // unique across sessions: one session
                                      // never names another's buffer

  // Reserves n bytes of the budget; false when they do not fit.
  bool try_reserve(size_t n);
  void release(size_t n) { memory_in_use.fetch_sub(n, std::memory_order_acq_rel); }
  void log_line(const std::string& peer, const std::string& what) const;
};

class Session {
 public:
  Session(WorkerShared& shared, Stream& stream);
  ~Session();  // waits for its work, then frees everything it owns
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void run() noexcept;

 private:
  enum class State { hello, auth, ready };
  struct Owned {
    std::unique_ptr<Buffer> buffer;
    size_t reserved = 0;  // bytes of the worker's budget
  };
  struct StoredGraph {
    std::unique_ptr<DecodedGraph> graph;
    uint32_t device = 0;
    std::vector<uint64_t> handles;  // the buffers its tensors live in
    uint64_t last_use = 0;
  };
  // A SET_TENSOR_HASH miss whose bytes are arriving in SET_TENSOR frames.
  struct PendingUpload {
    ContentHash hash{};
    uint64_t handle = 0, offset = 0, size = 0, received = 0;
  };

  void loop();
  void dispatch(Cmd c, uint32_t length);
  void read_payload(uint32_t length);

  void on_hello();
  void on_auth();
  void on_get_devices();
  void on_alloc_buffer();
  void on_free_buffer();
  void on_clear_buffer();
  void on_set_tensor(uint32_t length);
  void on_set_tensor_hash();
  void on_get_tensor();
  void on_copy_tensor();
  void on_memset_tensor();
  void on_graph_compute();
  void on_synchronize();
  void on_event_record();
  void on_event_wait();
  void on_event_sync();
  void on_ping();

  // Validation (each throws Error(invalid_input) naming the command and value).
  Buffer& live_buffer(uint64_t handle);
  void check_range(Buffer& b, uint64_t handle, uint64_t offset, uint64_t size);
  void check_device(uint32_t device);

  // Replies.
  void reply(const Writer& w);
  void reply_empty();
  void send_error(ErrorKind kind, const std::string& message);
  // For a command with a reply: sends the deferred error instead and returns true.
  bool answer_deferred();
  void defer(const Error& e);
  void defer_current_exception();

  // Backends and ordering: direct buffer access waits for running graphs.
  Backend& backend(uint32_t device);
  void sync_device(uint32_t device);
  void sync_all();

  // Byte access to a buffer, for host memory directly and otherwise through
  // the Buffer interface.
  void write_bytes(Buffer& b, uint64_t offset, const void* data, size_t size);
  void read_bytes(Buffer& b, uint64_t offset, void* data, size_t size);
  void fill_bytes(Buffer& b, uint64_t offset, uint8_t value, size_t size);

  void drop_graphs_using(uint64_t handle);
  void advance_upload(uint64_t handle, uint64_t offset, uint64_t size);

  WorkerShared& shared_;
  Stream& stream_;
  std::string peer_;
  Cmd current_ = Cmd::hello;
  State state_ = State::hello;
  bool between_frames_ = false;
  bool frame_read_ = false;  // the current frame's payload is fully read (errors keep the stream in step)
  std::string end_reason_;   // why the session closed itself, for the one log line  // the connection ended cleanly, at
                             // a frame boundary
  uint8_t challenge_[kChallengeBytes] = {};
  std::vector<uint8_t> payload_;  // reused for every frame; grows only after the limit check

  std::unordered_map<uint64_t, Owned> buffers_;
  std::vector<std::unique_ptr<Backend>> backends_;  // by device index, created on first use
  std::vector<bool> pending_work_;                  // backend may still be running something
  std::unordered_map<uint64_t, StoredGraph> graphs_;
  std::unordered_map<uint64_t, uint64_t> dropped_graphs_;  // graph id -> freed handle, for messages
  uint64_t use_clock_ = 0;
  std::unordered_map<uint64_t, uint32_t> events_;  // recorded event id -> device
  std::deque<PendingUpload> uploads_;
  std::optional<Error> deferred_;
};

}  // namespace weft::rpc
