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
#include <chrono>
#include <functional>
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
#include "protocol/messages.h"
#include "protocol/wire.h"
#include "server/dial_policy.h"
#include "server/heartbeat.h"
#include "server/peer_inbox.h"
#include "transport/stream.h"
#include "weft/backend/backend.h"
#include "weft/core/error.h"
#include "weft/rpc/worker.h"

namespace weft::rpc {

class TensorCache;
class Connection;

// What the worker's slot bookkeeping and its disconnect monitor see of a
// session; written by the session's thread, read by the worker's.
struct SessionStatus {
  std::atomic<bool> ready{false};        // the handshake is done and the session admitted
  std::atomic<bool> holds_state{false};  // owns buffers or graphs: never evicted for being idle
  std::atomic<int64_t> idle_since_ms{0}; // steady clock, when it last finished a frame (0: busy)
  std::atomic<bool> computing{false};    // inside a compute: the monitor watches its peer
  std::atomic<bool> cancel{false};       // set by the monitor when the peer closed mid-compute
};

struct WorkerShared {
  std::vector<Device*> devices;  // at most kMaxDevices
  size_t memory_budget = SIZE_MAX;
  SessionLimits limits;
  TensorCache* cache = nullptr;  // nullptr: no tensor cache
  std::optional<std::string> auth_secret;
  bool log = true;
  // Called once a session finished its handshake: true admits it, false
  // turns it away as busy. Unset: every session is admitted.
  std::function<bool(SessionStatus&)> admit;
  // Bit k: Op k is answered "not supported" (WorkerTestAccess::refuse_ops).
  uint64_t refused_ops = 0;

  std::atomic<size_t> memory_in_use{0};
  std::atomic<uint64_t> next_handle{1};  // unique across sessions: one session never names another's buffer
  std::atomic<bool> stopping{false};     // Worker::stop() is closing every session
  PeerRegistry peers;                    // tickets of the sessions peer links may push into
  DialPolicy dial_policy;                // where PEER_CONNECT may dial (WorkerOptions::peer_allow)
  DialRate dial_rate;                    // how often, all sessions together
  uint16_t listen_port = 0;              // this worker's own port (0: none): never dialed on a local address

  // Reserves n bytes of the budget; false when they do not fit.
  bool try_reserve(size_t n);
  void release(size_t n) { memory_in_use.fetch_sub(n, std::memory_order_acq_rel); }
  void log_line(const std::string& peer, const std::string& what) const;
  // Whether device computes node: its own supports_op, less refused_ops.
  // The one rule for SUPPORTS_OP and for a received graph's nodes.
  bool computes(const Device& device, const Tensor& node) const;
};

int64_t steady_now_ms();

class Session {
 public:
  // status: the worker's view of this session (nullptr: a private one).
  Session(WorkerShared& shared, Stream& stream, SessionStatus* status = nullptr);
  ~Session();  // waits for its work, then frees everything it owns
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void run() noexcept;

 private:
  // peer: a link another worker opened (PEER_ATTACH); it only pushes.
  enum class State { hello, auth, ready, peer };
  bool handshaking() const { return state_ == State::hello || state_ == State::auth; }
  struct Owned {
    std::unique_ptr<Buffer> buffer;
    size_t reserved = 0;  // bytes of the worker's budget
  };
  struct StoredGraph {
    std::unique_ptr<DecodedGraph> graph;
    uint32_t device = 0;
    std::vector<uint64_t> handles;  // the buffers its tensors live in
    uint64_t last_use = 0;
    size_t charged = 0;  // bytes of the session's memory account
    size_t working = 0;  // the backend's working memory (kernel scratch) it needs
  };
  // A SET_TENSOR_HASH miss whose bytes are arriving in SET_TENSOR frames.
  struct PendingUpload {
    ContentHash hash{};
    uint64_t handle = 0, offset = 0, size = 0, received = 0;
  };

  void loop();
  // The next frame header; false when the session ended between frames by
  // its idle or handshake timeout (end_reason_ says which).
  bool read_frame_header(uint8_t (&raw)[kFrameHeaderBytes]);
  // A header's command if the client may send it now (known, under its
  // payload limit, flags 0, allowed in this state); sets current_ and name.
  // Error(invalid_input) naming what is wrong otherwise.
  Cmd admit_frame(const FrameHeader& h, std::string& name);
  void dispatch(Cmd c, uint32_t length);
  void read_payload(uint32_t length);

  void on_hello();
  void on_auth();
  bool admit();  // false: turned away as busy (error sent, the session ends)
  void on_get_devices();
  void on_alloc_buffer();
  void on_free_buffer();
  void on_clear_buffer();
  void on_supports_op();
  void on_set_tensor(uint32_t length);
  void on_set_tensor_hash();
  void on_get_tensor();
  void on_set_tensor_rows();
  void on_get_tensor_rows();
  uint64_t rows_range(Buffer& b, uint64_t handle, uint64_t offset, uint64_t row_bytes, uint32_t n_rows);
  void on_copy_tensor();
  void on_memset_tensor();
  void on_graph_compute();
  void on_synchronize();
  void on_compute_stats();
  void on_event_record();
  void on_event_wait();
  void on_event_sync();
  void on_ping();
  // Peer links (session_peer.cpp).
  void on_peer_ticket();
  void on_peer_connect();
  void on_peer_attach();
  void on_peer_push();
  void on_push_to_peer();
  void on_peer_wait();
  void end_peer_links(const std::string& why) noexcept;

  // Validation (each throws Error(invalid_input) naming the command and value).
  Buffer& live_buffer(uint64_t handle);
  void check_range(Buffer& b, uint64_t handle, uint64_t offset, uint64_t size);
  void check_device(uint32_t device);

  // Replies.
  void reply(const Writer& w);
  template <class M>
  void reply(const M& m) {
    reply(encoded(m));
  }
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

  // The session's memory account: every byte it makes the worker hold
  // (buffers, frame payloads, stored graphs, events, kernel scratch) is
  // charged here first, against the session's limit and the worker's budget.
  // charge throws Error(out_of_memory) naming what did not fit.
  void charge(size_t n, const std::string& what);
  void refund(size_t n);
  void shrink_payload();  // gives back a large frame's payload memory

  // Deadlines (SessionLimits): the next frame header's, a frame body's and a reply's.
  std::chrono::steady_clock::time_point arm_header_deadline();  // returns it
  void arm_body_deadline(uint64_t length);
  void write_frame(const uint8_t* header, const void* data, size_t size);

  void erase_graph(std::unordered_map<uint64_t, StoredGraph>::iterator it);
  void compute_stored(StoredGraph& stored);
  StoredGraph& store_graph(const GraphComputeRequest& req);  // on_graph_compute's two cases
  StoredGraph& stored_graph(uint64_t graph_id, uint32_t device);
  void update_status();
  void drop_graphs_using(uint64_t handle);
  void advance_upload(uint64_t handle, uint64_t offset, uint64_t size);

  WorkerShared& shared_;
  Stream& stream_;
  SessionStatus own_status_;
  SessionStatus& status_;
  const std::chrono::steady_clock::time_point handshake_deadline_;
  size_t charged_ = 0;          // bytes of the worker's budget this session holds
  size_t payload_charged_ = 0;  // the part of charged_ that is payload_'s capacity
  std::vector<size_t> scratch_charged_;  // by device: the backend's working memory charged
  std::string peer_;
  Cmd current_ = Cmd::hello;
  State state_ = State::hello;
  bool between_frames_ = false;
  bool refused_ = false;     // turned away at the handshake: end after this frame
  bool frame_read_ = false;  // the current frame's payload is fully read (errors keep the stream in step)
  std::string end_reason_;   // why the session closed itself, for the one log line  // the connection ended cleanly, at
                             // a frame boundary
  uint8_t challenge_[kChallengeBytes] = {};
  std::vector<uint8_t> payload_;  // reused for every frame; grows only after the limit check

  std::unordered_map<uint64_t, Owned> buffers_;
  std::vector<std::unique_ptr<Backend>> backends_;  // by device index, created on first use
  std::vector<bool> pending_work_;                  // backend may still be running something
  std::vector<uint64_t> graphs_run_;                // per device: GRAPH_COMPUTEs run (COMPUTE_STATS)
  std::vector<uint64_t> compute_ns_;                // per device: time in its compute calls
  std::unordered_map<uint64_t, StoredGraph> graphs_;
  std::unordered_map<uint64_t, uint64_t> dropped_graphs_;  // graph id -> freed handle, for messages
  uint64_t use_clock_ = 0;
  std::unordered_map<uint64_t, uint32_t> events_;  // recorded event id -> device
  std::deque<PendingUpload> uploads_;
  std::optional<Error> deferred_;

  // Peer links: the inbox other workers push into (after PEER_TICKET), the
  // inbox this session pushes into when it is a link (State::peer), and the
  // links this session opened (PEER_CONNECT), by the host's link id.
  struct PeerLink {
    std::shared_ptr<Connection> connection;
    std::string endpoint;
    bool broken = false;
  };
  std::shared_ptr<PeerInbox> inbox_;
  Ticket ticket_{};
  std::shared_ptr<PeerInbox> attached_;
  uint32_t source_ = 0;
  std::unordered_map<uint32_t, PeerLink> links_;
  uint32_t dials_ = 0;  // PEER_CONNECTs that reached a dial decision, made or not

  // HEARTBEAT frames while busy, when the client asked (capability bit 4);
  // declared last: it stops before anything else of the session goes.
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace weft::rpc
