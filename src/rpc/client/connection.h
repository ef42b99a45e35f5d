// The client's connection to one worker endpoint (docs/rpc-protocol.md).
//
// Lifetime (the seeds' rule, see include/weft/rpc/client.h): one Connection per
// endpoint, found through a process-wide map of weak references; remote
// buffers, backends and events hold a shared_ptr, devices and buffer types
// only the endpoint. The connection closes when its last holder goes.
//
//   auto conn = rpc::get_connection("127.0.0.1:50052", options);
//   uint64_t handle = conn->call(rpc::AllocBufferRequest{device, size}).handle;   // protocol/messages.h
//   conn->send(rpc::FreeBufferRequest{handle});                                 // pipelined: no reply
//   conn->send(rpc::Cmd::set_tensor, head, bytes, n);   // fields, then bulk bytes uncopied
//
// Threading: every method is safe from any thread. One mutex serializes
// frames: a command without a reply is written and returns at once (the
// worker runs commands in order, so nothing is lost by not waiting); a
// command with a reply is written and its reply read under the same lock,
// so replies come back in order. A transport or protocol failure marks the
// connection broken: that call and every later one throw Error(disconnected,
// "[rpc] ENDPOINT COMMAND: what") at once; nothing ever aborts or hangs.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "protocol/messages.h"
#include "protocol/wire.h"
#include "transport/stream.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"

namespace weft::rpc {

// One device as GET_DEVICES describes it.
using RemoteDeviceInfo = DeviceInfo;

// A node's shape class: what a device's op support may depend on, less the
// exact dimensions (docs/rpc-protocol.md section 3a says why that is
// enough). Answers to SUPPORTS_OP are cached under it, per connection.
struct SupportKey {
  uint32_t device = 0;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t layout = 0;                           // bit 0 rows_contiguous(), bit 1 is_contiguous()
  std::array<uint8_t, kMaxSrc> src_dtype{};    // 0xFF: no source in that slot
  std::array<uint8_t, kMaxSrc> src_layout{};   // as layout
  std::array<int32_t, kMaxOpParams> op_params{};
  auto operator<=>(const SupportKey&) const = default;
  static SupportKey of(uint32_t device, const Tensor& node);
};

// "host:port" or "[v6addr]:port", either after "tls://" and then optionally
// with "#sha256:HEX", split into a host for tcp_connect (without brackets), a
// port, and the TLS fields. Throws Error(invalid_input) naming the endpoint.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  bool tls = false;   // tls://HOST:PORT
  std::string pin;    // tls://HOST:PORT#sha256:HEX: the fingerprint ("" for none)
  std::string host_port() const;  // "host:port" or "[v6]:port", without scheme or pin
};
Endpoint parse_endpoint(const std::string& endpoint);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Connects and handshakes (HELLO, then AUTH when the worker asks).
  // Throws Error(disconnected) when the worker cannot be reached,
  // Error(invalid_input) when it wants a secret we lack or refuses ours,
  // Error(unsupported) for another major version.
  // counted: included in open_count() (a worker's peer links are not).
  Connection(std::string endpoint, const RpcOptions& options, bool counted = true);
  ~Connection();  // shuts the stream down quietly
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  // The endpoint another worker dials for a peer link to this one: for TLS,
  // tls://HOST:PORT#FINGERPRINT with the fingerprint this host verified.
  std::string link_endpoint() const;
  bool tls() const { return !fingerprint_.empty(); }
  // The capability bits both sides understand.
  uint64_t capabilities() const { return capabilities_; }
  bool has(Capability c) const { return (capabilities_ & c) != 0; }
  // The worker's minor protocol version (HELLO reply): what it understands
  // beyond the capability bits, such as the ops it knows (ops_known_at_minor).
  uint16_t peer_minor() const { return peer_minor_; }
  // Whether the worker knows op's number. One that does not refuses the
  // number as malformed and ends the session, so such an op is never sent.
  bool knows_op(Op op) const { return static_cast<int>(op) < ops_known_at_minor(peer_minor_); }
  // Whether the worker's protocol takes node t at all (minor_needed).
  bool knows_node(const Tensor& t) const { return minor_needed(t) <= peer_minor_; }
  bool broken() const { return broken_.load(); }
  RpcStats stats() const;

  // Hang detection (docs/recovery.md "Detection"): with a worker that sends
  // HEARTBEAT frames while busy (protocol 1.10, RpcOptions::detect_hangs),
  // a reply wait fails the connection, Error(disconnected), after
  // silence_bound() without a byte from the worker: max(kMinSilence, 5 x the
  // longest silence a live worker kept so far, decaying). Zero without
  // heartbeats (an older worker): only reply_timeout bounds a wait.
  std::chrono::nanoseconds silence_bound() const;
  static constexpr std::chrono::milliseconds kMinSilence{2000};
  static constexpr int kSilenceFactor = 5;
  // With heartbeats, the keepalive PINGs a worker no frame went to for this
  // long (RpcOptions::keepalive when shorter).
  static constexpr std::chrono::milliseconds kProbeIdle{1000};
  // A wait for this worker's reply was given up because another worker was
  // found hung meanwhile (this one was alive: it sent heartbeats). The
  // connection is broken; the worker is not lost (rpc_alive says true).
  bool abandoned() const { return abandoned_.load(); }

  // A command without a reply: header, head's fields, then bulk bytes (sent
  // by a gather write, not copied). On return the bytes are in the kernel:
  // the caller's memory is free at once.
  void send(Cmd cmd, const Writer& head, const void* bulk = nullptr, size_t bulk_size = 0);

  // A message of protocol/messages.h without a reply (pipelined).
  template <class M>
  void send(const M& m) {
    send(static_cast<Cmd>(M::kCode), encoded(m));
  }

  // A command without a reply that may wait in this connection's outgoing
  // buffer (at most kCorkBytes) until the next frame that goes out at once
  // (any send() or call() here), a flush(), or a call() on ANY connection of
  // this process: a caller about to block first writes every frame that
  // waits anywhere, so no worker waits for a frame the host still holds
  // (flush_all_waiting). So a token's inputs, waits, events, graph ids and
  // pushes leave in one write per worker (one message per hop). The bytes
  // are copied.
  void send_later(Cmd cmd, const Writer& head, const void* bulk = nullptr, size_t bulk_size = 0);
  template <class M>
  void send_later(const M& m) {
    send_later(static_cast<Cmd>(M::kCode), encoded(m));
  }
  static constexpr size_t kCorkBytes = size_t{64} << 10;
  // Writes whatever send_later left waiting.
  void flush();
  // flush() of every connection of this process with frames waiting.
  static void flush_all_waiting();
  // A message with a reply: sends it and decodes M::Reply (all of it).
  template <class M>
  typename M::Reply call(const M& m) {
    return call(static_cast<Cmd>(M::kCode), encoded(m), [](Reader& r) { return M::Reply::decode(r); });
  }

  // Whether device `device` of the worker computes node t, as that device
  // itself says (SUPPORTS_OP), asked once per shape class (SupportKey) for
  // the life of this connection: a reconnect asks again. A worker without
  // kCapOpSupport (protocol 1.0) cannot say, and one whose minor version
  // predates t (knows_node) does not know it: false, without asking.
  // Thread-safe; two threads may both ask about a new class (the answers
  // agree). Throws Error(disconnected) on a broken connection.
  bool supports_op(uint32_t device, const Tensor& t);
  static constexpr size_t kSupportCacheSize = 4096;  // classes kept; cleared when full

  // A command with a reply: parse(reader) reads the reply's fields (which
  // must be read completely). An ERROR reply throws Error of its kind.
  template <class F>
  auto call(Cmd cmd, const Writer& head, F parse) -> decltype(parse(std::declval<Reader&>())) {
    using R = decltype(parse(std::declval<Reader&>()));
    if constexpr (std::is_void_v<R>) {
      call_impl(cmd, head, [&](Reader& r) { parse(r); });
    } else {
      R result{};
      call_impl(cmd, head, [&](Reader& r) { result = parse(r); });
      return result;
    }
  }
  void call(Cmd cmd, const Writer& head) {
    call_impl(cmd, head, [](Reader&) {});
  }

  // GET_TENSOR of [offset, offset + size) of a buffer into out, split into
  // frames under the reply limit, a few requests in flight at once.
  void get_tensor(uint64_t handle, uint64_t offset, void* out, size_t size);
  // GET_TENSOR_ROWS (1.7): n_rows rows of row_bytes at offset into out, the
  // rows the worker does not list as zeros; in pieces whose replies fit a
  // frame. Needs row_bytes + 4 <= kMaxPayload - 4.
  void get_tensor_rows(uint64_t handle, uint64_t offset, uint64_t row_bytes, uint64_t n_rows, void* out);

  // A GET_TENSOR started now and taken later (connection_reads.cpp): the
  // request is queued to go with the next write (after the frames queued
  // before it, so the worker answers once the work they submit is done),
  // and its reply is read when finish_get_tensor asks for it, or earlier,
  // by any call that reads a reply (replies come in request order: theirs
  // first). start returns a ticket, or 0 when it cannot (size over one
  // frame; the connection unusable): read with get_tensor then. finish
  // copies the reply into out, waiting for it if need be, and throws as
  // get_tensor would; a ticket is finished or dropped once.
  uint64_t start_get_tensor(uint64_t handle, uint64_t offset, size_t size);
  void finish_get_tensor(uint64_t ticket, void* out);
  void drop_get_tensor(uint64_t ticket) noexcept;

  // GRAPH_COMPUTE of an encoded graph (section 4 bytes). A graph with the
  // same bytes sent before on this connection (one of the last
  // kGraphCacheSize) is referred to by its id instead of sent again.
  void graph_compute(uint32_t device, std::span<const uint8_t> graph);
  static constexpr size_t kGraphCacheSize = 32;  // half the worker's 64: a margin

  // Event ids of this session, reused once released (the worker caps
  // events per session and has no command to free one). 0 when at the cap.
  uint64_t acquire_event_id();
  void release_event_id(uint64_t id);

  std::vector<DeviceInfo> get_devices();

  // Peer links (docs/rpc-protocol.md section 8). The route from this
  // connection's worker to `to`'s: the link id this session knows it by and
  // the source id `to`'s session knows it by. Set up once per pair (a
  // PEER_TICKET round trip to `to`, a PEER_CONNECT round trip here), then
  // reused. When the link cannot be made (the workers cannot reach or
  // authenticate to each other), link is 0 and failure says why, for good:
  // that pair's copies go through the host.
  struct PeerRoute {
    uint32_t link = 0;
    uint32_t source = 0;
    std::string failure;
  };
  PeerRoute peer_route(Connection& to);
  // Why a route out of this connection could not be made ("" when none failed).
  std::string peer_failure() const;
  // Event ids for pushes into this connection's session (unique in it).
  uint64_t next_peer_event() { return next_peer_event_.fetch_add(1) + 1; }

  // Process-wide count of live connections.
  static int open_count();

 private:
  void call_impl(Cmd cmd, const Writer& head, const std::function<void(Reader&)>& parse);
  // The following run with mu_ held.
  void check_usable(Cmd cmd) const;
  // Writes what waits in pending_, then this frame, in one write.
  void write_frame(Cmd cmd, const void* a, size_t na, const void* b, size_t nb);
  // Appends a frame to pending_ (at most kCorkBytes in all; else writes).
  void queue_frame(Cmd cmd, const void* a, size_t na, const void* b, size_t nb);
  // Reads the reply header for cmd; an ERROR frame throws (after reading it).
  uint32_t read_reply_header(Cmd cmd, uint32_t limit);
  void read_payload(Cmd cmd, void* data, size_t n);
  // Reads the replies of every started GET_TENSOR still in flight, keeping
  // them (or the error a worker answered with) for finish_get_tensor.
  void take_started_replies();
  [[noreturn]] void read_error_frame(Cmd cmd, uint32_t length);
  // Marks the connection broken and throws Error(disconnected) about cmd.
  [[noreturn]] void fail_broken(Cmd cmd, const std::string& what);
  void handshake(const RpcOptions& options);
  // With mu_ held, by calls that get a reply: a deferred error the keepalive
  // PING received is thrown here, as the worker would have answered this call.
  void throw_pending_error();
  // Sends PING whenever no frame went out for `every` (RpcOptions::keepalive).
  void keepalive_loop(std::chrono::milliseconds every);
  // Hang detection (connection_liveness.cpp). Reads a frame header; with
  // heartbeats, under the silence bound (past it: fail_broken saying the
  // worker is stopped, hung or unreachable, and counted in hangs_found()).
  void read_header_bytes(Cmd cmd, uint8_t (&raw)[kFrameHeaderBytes]);
  // Before a write (with heartbeats): the stream's write stall bound set to
  // the silence bound, so a worker that stopped reading cannot hold a write
  // longer than a read (Stream::set_write_stall_bound).
  void bound_write_stall();
  // A HEARTBEAT came while cmd's reply is awaited: counted, and the wait
  // given up (abandoned_) when a worker was found hung since this one's
  // last reply.
  void on_heartbeat(Cmd cmd);
  // Workers this process found hung so far.
  static uint64_t hangs_found();
  // A reply body's read deadline allows, after the silence bound, for its
  // bytes at this rate (the worker's own slowest, session.cpp).
  static constexpr uint64_t kMinBytesPerMs = 1024;  // 1 MiB/s

  const std::string endpoint_;
  std::string fingerprint_;  // the TLS certificate this host verified ("" for plain TCP)
  std::unique_ptr<Stream> stream_;
  uint64_t capabilities_ = 0;
  uint16_t peer_minor_ = 0;
  bool heartbeats_ = false;  // the worker sends HEARTBEAT frames (set by the handshake)
  std::atomic<bool> abandoned_{false};
  // With mu_: the process's count of hung workers when this worker's last
  // reply came. A heartbeat while it differs gives the wait up: the worker
  // has been busy since a hang, perhaps waiting for the hung one's push.
  uint64_t hangs_seen_ = 0;

  mutable std::mutex mu_;  // serializes frames and guards what follows
  std::atomic<bool> broken_{false};
  std::string broken_reason_;  // why, for the fast failures after
  std::vector<uint8_t> pending_;  // frames send_later left for the next write
  std::chrono::steady_clock::time_point last_frame_;  // when the last frame went out
  std::optional<Error> pending_error_;               // a deferred error the keepalive received
  struct StartedRead {
    uint64_t ticket = 0;
    size_t size = 0;
    bool dropped = false;
  };
  std::deque<StartedRead> in_flight_;                 // started GET_TENSORs whose replies are unread, in request order
  std::map<uint64_t, std::vector<uint8_t>> arrived_;  // their replies, read and not yet taken
  std::map<uint64_t, Error> refused_;                 // or the error the worker answered
  uint64_t next_read_ticket_ = 1;
  bool taking_started_ = false;                      // inside take_started_replies
  std::atomic<int64_t> slowest_silence_ns_{0};       // the longest a live worker kept silent (decaying)
  std::condition_variable keepalive_cv_;             // with mu_: wakes the keepalive to close
  bool closing_ = false;
  std::thread keepalive_thread_;

  struct GraphEntry {
    std::array<uint8_t, 16> key{};  // content hash of the encoded bytes
    uint32_t device = 0;
    uint64_t id = 0;
    uint64_t last_use = 0;
  };
  std::vector<GraphEntry> graphs_;
  uint64_t next_graph_id_ = 1;
  uint64_t graph_clock_ = 0;

  std::mutex events_mu_;
  std::vector<uint64_t> free_event_ids_;
  uint64_t next_event_id_ = 1;

  std::mutex support_mu_;  // guards support_ (never held while a frame is in flight)
  std::map<SupportKey, bool> support_;

  std::atomic<uint64_t> support_queries_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> round_trips_{0};
  std::atomic<uint64_t> heartbeats_received_{0};
  std::atomic<uint64_t> hangs_detected_{0};

  // Peer links: routes out of this session by the destination connection's
  // serial (a reconnected endpoint is a new session: a new route), and this
  // session's ticket and source ids for links into it.
  const uint64_t serial_;
  mutable std::mutex peer_mu_;
  std::map<uint64_t, PeerRoute> routes_;
  std::string peer_failure_;  // the first route that failed, for --stats
  uint32_t next_link_ = 0;
  uint32_t next_source_ = 0;
  std::atomic<uint64_t> next_peer_event_{0};
  std::atomic<uint64_t> wait_ns_{0};  // in read_reply_header, until the header arrived
  bool counted_ = false;  // included in open_count()
};

// The live connection to endpoint, or a new one (when there is none, or the
// live one is broken). Thread-safe; connects outside the process-wide lock.
std::shared_ptr<Connection> get_connection(const std::string& endpoint, const RpcOptions& options);
// The live connection to endpoint, or nullptr; never connects.
std::shared_ptr<Connection> find_connection(const std::string& endpoint);

}  // namespace weft::rpc

namespace weft {

// Process-wide count of open worker connections (Connection::open_count()),
// for the tests of the lifetime rules; internal, so that no installed header
// carries a test hook.
int rpc_open_connections();

}  // namespace weft
