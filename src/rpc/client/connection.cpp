// Connection: framing, handshake, the error rules and the graph cache of the
// client side of docs/rpc-protocol.md; and the process-wide endpoint map.
#include "client/connection.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "client/known_workers.h"
#include "protocol/content_hash.h"
#include "transport/tls.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

std::atomic<int> g_open_connections{0};
std::atomic<uint64_t> g_connection_serial{0};

// Connections with frames waiting (send_later), for flush_all_waiting. Its
// lock is never held while a connection's mu_ is taken.
struct Waiting {
  std::mutex mu;
  std::vector<std::weak_ptr<Connection>> list;
};
Waiting& waiting() {
  static Waiting* w = new Waiting;  // leaked: connections may close during static destruction
  return *w;
}

constexpr uint64_t kClientCapabilities =
    kCapTensorCache | kCapEvents | kCapOpSupport | kCapPeerLinks | kCapHeartbeat;
constexpr char kAuthContext[] = "weft-auth-v1";

std::string command_name(Cmd cmd) {
  const char* name = cmd_name(static_cast<uint16_t>(cmd));
  return name != nullptr ? name : std::to_string(static_cast<unsigned>(cmd));
}

// A transport error's text without its "[rpc] " prefix (ours comes first).
std::string inner_text(const Error& e) {
  std::string text = e.what();
  const std::string prefix = "[rpc] ";
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

// The endpoint map: one slot per endpoint ever used, each with its own lock
// so that connecting to one endpoint never blocks users of another. Slots
// are never removed (one per distinct endpoint); the map is leaked on
// purpose so that buffers freed during static destruction never see it gone.
struct Slot {
  std::mutex mu;
  std::weak_ptr<Connection> connection;
};
struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Slot>> slots;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}
std::shared_ptr<Slot> slot_of(const std::string& endpoint, bool create) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.slots.find(endpoint);
  if (it != r.slots.end()) return it->second;
  if (!create) return nullptr;
  auto slot = std::make_shared<Slot>();
  r.slots.emplace(endpoint, slot);
  return slot;
}

}  // namespace

Endpoint parse_endpoint(const std::string& given) {
  auto bad = [&](const std::string& why) -> Endpoint {
    fail(ErrorKind::invalid_input, "rpc",
         "endpoint '" + given + "' " + why + " (want host:port, [v6addr]:port, or either after tls://)");
  };
  Endpoint e;
  std::string endpoint = given;
  constexpr std::string_view kTls = "tls://";
  if (endpoint.rfind(kTls, 0) == 0) {
    e.tls = true;
    endpoint = endpoint.substr(kTls.size());
    if (const size_t hash = endpoint.find('#'); hash != std::string::npos) {
      e.pin = normalize_fingerprint(endpoint.substr(hash + 1));
      if (e.pin.empty()) return bad("has a fingerprint that is not sha256: and 64 hex digits");
      endpoint = endpoint.substr(0, hash);
    }
  }
  std::string port;
  if (!endpoint.empty() && endpoint[0] == '[') {
    const size_t close = endpoint.find(']');
    if (close == std::string::npos || close + 1 >= endpoint.size() || endpoint[close + 1] != ':') {
      return bad("has no ']:' after the address");
    }
    e.host = endpoint.substr(1, close - 1);
    port = endpoint.substr(close + 2);
  } else {
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos) return bad("has no port");
    e.host = endpoint.substr(0, colon);
    port = endpoint.substr(colon + 1);
    if (e.host.find(':') != std::string::npos) return bad("has an IPv6 address without brackets");
  }
  if (e.host.empty()) return bad("has no host");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("has an invalid port");
  }
  const unsigned long p = std::stoul(port);
  if (p == 0 || p > 65535) return bad("has a port outside 1..65535");
  e.port = static_cast<uint16_t>(p);
  return e;
}

std::string Endpoint::host_port() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Connection::link_endpoint() const {
  if (fingerprint_.empty()) return endpoint_;
  return "tls://" + parse_endpoint(endpoint_).host_port() + "#" + fingerprint_;
}

Connection::Connection(std::string endpoint, const RpcOptions& options, bool counted)
    : endpoint_(std::move(endpoint)), hangs_seen_(hangs_found()), serial_(g_connection_serial.fetch_add(1) + 1) {
  const Endpoint e = parse_endpoint(endpoint_);
  TcpOptions tcp;
  tcp.read_timeout = options.reply_timeout;
  try {
    stream_ = tcp_connect(e.host, e.port, tcp);
  } catch (const Error& err) {
    fail(ErrorKind::disconnected, "rpc", endpoint_ + " connect: " + inner_text(err));
  }
  if (e.tls) {
    std::string presented;
    try {
      stream_ = tls_connect(std::move(stream_), std::chrono::steady_clock::now() + tcp.connect_timeout, &presented);
    } catch (const Error& err) {
      fail(ErrorKind::disconnected, "rpc", endpoint_ + " " + inner_text(err));
    }
    // Nothing is sent over the stream until the certificate is the one trusted.
    check_worker_fingerprint(e.host_port(), e.pin, presented, options);
    fingerprint_ = presented;
  }
  // A worker that accepted but does not answer (stopped, hung) is not
  // waited for past the connect timeout; then heartbeats bound the waits.
  if (options.detect_hangs) stream_->set_read_deadline(std::chrono::steady_clock::now() + tcp.connect_timeout);
  handshake(options);
  stream_->set_read_deadline(Stream::Deadline::max());
  last_frame_ = std::chrono::steady_clock::now();
  // With heartbeats the keepalive is also a probe: a worker sent nothing
  // for kProbeIdle is asked, so one that hung while this host waits on
  // another is found (docs/recovery.md "Detection").
  auto every = options.keepalive;
  if (heartbeats_) every = every.count() > 0 ? std::min(every, kProbeIdle) : kProbeIdle;
  if (every.count() > 0) {
    keepalive_thread_ = std::thread([this, every] { keepalive_loop(every); });
  }
  counted_ = counted;
  if (counted_) g_open_connections.fetch_add(1);
}

Connection::~Connection() {
  try {
    flush();  // what send_later left (a FREE_BUFFER's neighbours): the worker frees it anyway when we close
  } catch (...) {
  }
  try {
    // First: wakes a keepalive PING blocked on a worker that stopped answering.
    if (stream_) stream_->shutdown();
  } catch (...) {
    // Closing quietly: the worker frees the session when the stream ends.
  }
  if (keepalive_thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    keepalive_cv_.notify_all();
    keepalive_thread_.join();
  }
  if (counted_) g_open_connections.fetch_sub(1);
}

int Connection::open_count() {
  return g_open_connections.load();
}

RpcStats Connection::stats() const {
  RpcStats s;
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  s.round_trips = round_trips_.load();
  s.wait_seconds = static_cast<double>(wait_ns_.load()) * 1e-9;
  s.support_queries = support_queries_.load();
  s.heartbeats = heartbeats_received_.load();
  s.hangs_detected = hangs_detected_.load();
  s.peer_link_failure = peer_failure();
  return s;
}

void Connection::handshake(const RpcOptions& options) {
  std::lock_guard lock(mu_);
  HelloRequest hello;
  hello.capabilities = kClientCapabilities;
  if (!options.peer_links) hello.capabilities &= ~uint64_t{kCapPeerLinks};
  if (!options.detect_hangs) hello.capabilities &= ~uint64_t{kCapHeartbeat};
  const Writer w = encoded(hello);
  write_frame(Cmd::hello, w.data().data(), w.data().size(), nullptr, 0);
  const uint32_t length = read_reply_header(Cmd::hello, kMaxPayload);
  std::vector<uint8_t> payload(length);
  read_payload(Cmd::hello, payload.data(), payload.size());
  ++round_trips_;
  bool auth_required = false;
  std::array<uint8_t, kChallengeBytes> challenge{};
  try {
    const auto reply = parse<HelloReply>(payload);
    if (reply.magic != kMagicBytes) fail_broken(Cmd::hello, "the peer is not a weft worker (bad magic)");
    // The minor needs no check: what a smaller one lacks, its capability bits
    // and its op count (knows_op) say.
    if (reply.major != kMajor) {
      fail(ErrorKind::unsupported, "rpc",
           endpoint_ + " HELLO: the worker speaks protocol " + std::to_string(reply.major) + ".x, this client " +
               std::to_string(kMajor) + "." + std::to_string(kMinor));
    }
    capabilities_ = reply.capabilities & hello.capabilities;
    peer_minor_ = reply.minor;
    auth_required = reply.auth_required;
    challenge = reply.challenge;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::invalid_input) throw;
    fail_broken(Cmd::hello, std::string("malformed reply: ") + e.what());
  }
  // From the next reply on (AUTH's included), reads skip HEARTBEAT frames
  // and a silence past the bound is a dead worker.
  heartbeats_ = has(kCapHeartbeat);
  if (!auth_required) return;
  if (!options.auth_secret) {
    broken_ = true;
    fail(ErrorKind::invalid_input, "rpc",
         endpoint_ + " AUTH: the worker requires authentication and no secret was given (RpcOptions::auth_secret)");
  }
  std::vector<uint8_t> message(kAuthContext, kAuthContext + sizeof kAuthContext - 1);
  message.insert(message.end(), challenge.begin(), challenge.end());
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned mac_length = 0;
  const std::string& key = *options.auth_secret;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), mac, &mac_length) ==
          nullptr ||
      mac_length != kAuthMacBytes) {
    fail(ErrorKind::internal, "rpc", endpoint_ + " AUTH: HMAC-SHA256 failed");
  }
  AuthRequest auth;
  std::copy(mac, mac + kAuthMacBytes, auth.mac.begin());
  const Writer aw = encoded(auth);
  write_frame(Cmd::auth, aw.data().data(), aw.data().size(), nullptr, 0);
  const uint32_t auth_length = read_reply_header(Cmd::auth, kMaxPayload);
  if (auth_length != 0) fail_broken(Cmd::auth, "malformed reply: " + std::to_string(auth_length) + " bytes, want 0");
  ++round_trips_;
}

void Connection::fail_broken(Cmd cmd, const std::string& what) {
  if (!broken_.exchange(true)) broken_reason_ = command_name(cmd) + ": " + what;
  try {
    stream_->shutdown();
  } catch (...) {
  }
  throw Error(ErrorKind::disconnected, "[rpc] " + endpoint_ + " " + command_name(cmd) + ": " + what);
}

void Connection::check_usable(Cmd cmd) const {
  if (broken_.load()) {
    throw Error(ErrorKind::disconnected, "[rpc] " + endpoint_ + " " + command_name(cmd) +
                                             ": the connection failed earlier (" + broken_reason_ + ")");
  }
}

void Connection::write_frame(Cmd cmd, const void* a, size_t na, const void* b, size_t nb) {
  const size_t length = na + nb;
  if (length > payload_limit(cmd)) {
    fail(ErrorKind::invalid_input, "rpc",
         endpoint_ + " " + command_name(cmd) + ": payload of " + std::to_string(length) +
             " bytes is over the limit of " + std::to_string(payload_limit(cmd)));
  }
  // What waits, the header and fields in one buffer; bulk bytes go out uncopied.
  const size_t waiting = pending_.size();
  pending_.resize(waiting + kFrameHeaderBytes + na);
  encode_header(FrameHeader{static_cast<uint32_t>(length), static_cast<uint16_t>(cmd), 0}, pending_.data() + waiting);
  if (na > 0) std::memcpy(pending_.data() + waiting + kFrameHeaderBytes, a, na);
  bound_write_stall();
  try {
    stream_->write_all(pending_.data(), pending_.size(), b, nb);
  } catch (const Error& e) {
    pending_.clear();
    fail_broken(cmd, inner_text(e));
  }
  bytes_sent_ += pending_.size() + nb;
  pending_.clear();
  if (pending_.capacity() > 4 * kCorkBytes) std::vector<uint8_t>().swap(pending_);  // after a large frame's head
  last_frame_ = std::chrono::steady_clock::now();
}

void Connection::send_later(Cmd cmd, const Writer& head, const void* bulk, size_t bulk_size) {
  std::lock_guard lock(mu_);
  check_usable(cmd);
  queue_frame(cmd, head.data().data(), head.data().size(), bulk, bulk_size);
}

void Connection::queue_frame(Cmd cmd, const void* a, size_t na, const void* b, size_t nb) {
  const size_t frame = kFrameHeaderBytes + na + nb;
  if (pending_.size() + frame > kCorkBytes) {  // too much to hold: out now, with what waits
    write_frame(cmd, a, na, b, nb);
    return;
  }
  if (pending_.empty()) {
    std::weak_ptr<Connection> self = weak_from_this();
    if (!self.expired()) {
      Waiting& w = waiting();
      std::lock_guard lock(w.mu);
      w.list.push_back(std::move(self));
    }
  }
  const size_t at = pending_.size();
  pending_.resize(at + frame);
  encode_header(FrameHeader{static_cast<uint32_t>(na + nb), static_cast<uint16_t>(cmd), 0}, pending_.data() + at);
  if (na > 0) std::memcpy(pending_.data() + at + kFrameHeaderBytes, a, na);
  if (nb > 0) std::memcpy(pending_.data() + at + kFrameHeaderBytes + na, b, nb);
}

void Connection::flush_all_waiting() {
  std::vector<std::weak_ptr<Connection>> list;
  {
    Waiting& w = waiting();
    std::lock_guard lock(w.mu);
    list.swap(w.list);
  }
  for (const auto& weak : list) {
    if (auto c = weak.lock()) {
      try {
        c->flush();
      } catch (const Error&) {
        // That connection is broken now; its own users hear it.
      }
    }
  }
}

void Connection::flush() {
  std::lock_guard lock(mu_);
  if (pending_.empty() || broken_.load()) return;
  bound_write_stall();
  try {
    stream_->write_all(pending_.data(), pending_.size(), nullptr, 0);
  } catch (const Error& e) {
    pending_.clear();
    fail_broken(Cmd::ping, inner_text(e));
  }
  bytes_sent_ += pending_.size();
  pending_.clear();
  last_frame_ = std::chrono::steady_clock::now();
}

void Connection::read_payload(Cmd cmd, void* data, size_t n) {
  // A frame's body follows its header at once: with heartbeats, the silence
  // bound plus the time n bytes take at the slowest rate allowed.
  if (heartbeats_) {
    stream_->set_read_deadline(std::chrono::steady_clock::now() + silence_bound() +
                               std::chrono::milliseconds(n / kMinBytesPerMs));
  }
  try {
    stream_->read_exact(data, n);
  } catch (const Error& e) {
    fail_broken(cmd, inner_text(e));
  }
  bytes_received_ += n;
}

uint32_t Connection::read_reply_header(Cmd cmd, uint32_t limit) {
  take_started_replies();  // asked before this: their replies come first
  uint8_t raw[kFrameHeaderBytes];
  const auto t0 = std::chrono::steady_clock::now();
  FrameHeader h;
  for (;;) {
    read_header_bytes(cmd, raw);
    h = decode_header(raw);
    // A busy worker's sign of life (section 2a): skipped wherever a reply is awaited.
    if (!heartbeats_ || h.command != kHeartbeatFrame) break;
    if (h.length != 0 || h.flags != 0) fail_broken(cmd, "protocol error: a HEARTBEAT frame with a payload or flags");
    on_heartbeat(cmd);
  }
  hangs_seen_ = hangs_found();  // a reply (or ERROR): this worker is not stuck behind an earlier hang
  wait_ns_ += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  if (h.command == static_cast<uint16_t>(Cmd::error)) read_error_frame(cmd, h.length);
  if (h.command != (static_cast<uint16_t>(cmd) | kReplyBit)) {
    fail_broken(
        cmd, "protocol error: reply command 0x" + [&] {
          char buf[8];
          std::snprintf(buf, sizeof buf, "%04x", h.command);
          return std::string(buf);
        }() + " is not this command's reply");
  }
  if (h.flags != 0) fail_broken(cmd, "protocol error: reply flags " + std::to_string(h.flags));
  if (h.length > limit) {
    fail_broken(cmd, "protocol error: reply of " + std::to_string(h.length) + " bytes, limit " + std::to_string(limit));
  }
  return h.length;
}

void Connection::read_error_frame(Cmd cmd, uint32_t length) {
  if (length > kMaxPayload) fail_broken(cmd, "protocol error: ERROR frame of " + std::to_string(length) + " bytes");
  std::vector<uint8_t> payload(length);
  read_payload(cmd, payload.data(), payload.size());
  ErrorKind kind = ErrorKind::internal;
  std::string message;
  try {
    ErrorReply e = parse<ErrorReply>(payload);
    kind = e.kind;
    message = std::move(e.message);
  } catch (const Error& e) {
    fail_broken(cmd, std::string("protocol error: malformed ERROR frame: ") + e.what());
  }
  const std::string text = "[rpc] " + endpoint_ + " " + command_name(cmd) + ": " + message;
  if (kind == ErrorKind::invalid_input) {
    // The worker ends the session after this error: nothing of it is left.
    if (!broken_.exchange(true)) broken_reason_ = command_name(cmd) + ": the worker ended the session: " + message;
    try {
      stream_->shutdown();
    } catch (...) {
    }
  }
  throw Error(kind, text);
}

void Connection::keepalive_loop(std::chrono::milliseconds every) {
  std::unique_lock lock(mu_);
  while (!closing_ && !broken_.load()) {
    const auto due = last_frame_ + every;
    // Not while a submission's frames wait: its PING would hold mu_ for a
    // round trip the queued frames (a PEER_WAIT for a push the host has yet
    // to send) could make last until the worker's wait deadline.
    if (!pending_.empty() || !in_flight_.empty()) {  // nor while a started read's reply is due
      keepalive_cv_.wait_for(lock, std::min(every, std::chrono::milliseconds(1000)));
      continue;
    }
    if (std::chrono::steady_clock::now() < due) {
      keepalive_cv_.wait_until(lock, due);
      continue;
    }
    try {
      write_frame(Cmd::ping, nullptr, 0, nullptr, 0);
      const uint32_t length = read_reply_header(Cmd::ping, 0);
      if (length != 0) fail_broken(Cmd::ping, "malformed reply: " + std::to_string(length) + " bytes, want 0");
      ++round_trips_;
    } catch (const Error& e) {
      // A broken connection fails every later call by itself; an error the
      // worker deferred (the session stays) is the next call's to report.
      if (!broken_.load() && !pending_error_) pending_error_ = e;
    }
  }
}

void Connection::throw_pending_error() {
  if (!pending_error_) return;
  const Error e = *pending_error_;
  pending_error_.reset();
  throw e;
}

void Connection::send(Cmd cmd, const Writer& head, const void* bulk, size_t bulk_size) {
  std::lock_guard lock(mu_);
  check_usable(cmd);
  write_frame(cmd, head.data().data(), head.data().size(), bulk, bulk_size);
}

void Connection::call_impl(Cmd cmd, const Writer& head, const std::function<void(Reader&)>& parse) {
  flush_all_waiting();  // about to block: nothing may wait in the host for what the reply waits for
  std::lock_guard lock(mu_);
  check_usable(cmd);
  throw_pending_error();
  write_frame(cmd, head.data().data(), head.data().size(), nullptr, 0);
  const uint32_t length = read_reply_header(cmd, kMaxPayload);
  std::vector<uint8_t> payload(length);
  read_payload(cmd, payload.data(), payload.size());
  ++round_trips_;
  try {
    Reader r(payload, command_name(cmd) + " reply");
    parse(r);
    r.expect_end();
  } catch (const Error& e) {
    fail_broken(cmd, std::string("malformed reply: ") + e.what());
  }
}

void Connection::get_tensor(uint64_t handle, uint64_t offset, void* out, size_t size) {
  auto* dst = static_cast<uint8_t*>(out);
  flush_all_waiting();  // about to block (call_impl says why)
  // One request at a time: each chunk is big enough that a round trip per
  // chunk costs little, and nothing is left in flight when one fails.
  while (size > 0) {
    const size_t n = std::min<size_t>(size, kMaxPayload);
    const Writer w = encoded(GetTensorRequest{handle, offset, n});
    std::lock_guard lock(mu_);
    check_usable(Cmd::get_tensor);
    throw_pending_error();
    write_frame(Cmd::get_tensor, w.data().data(), w.data().size(), nullptr, 0);
    const uint32_t length = read_reply_header(Cmd::get_tensor, kMaxPayload);
    if (length != n) {
      fail_broken(Cmd::get_tensor, "malformed reply: " + std::to_string(length) + " bytes, want " + std::to_string(n));
    }
    read_payload(Cmd::get_tensor, dst, n);
    ++round_trips_;
    dst += n;
    offset += n;
    size -= n;
  }
}

void Connection::get_tensor_rows(uint64_t handle, uint64_t offset, uint64_t row_bytes, uint64_t n_rows, void* out) {
  auto* dst = static_cast<uint8_t*>(out);
  const uint64_t per_piece = (kMaxPayload - 4) / (row_bytes + 4);  // rows whose reply fits one frame
  flush_all_waiting();  // about to block (call_impl says why)
  std::vector<uint8_t> payload;
  while (n_rows > 0) {
    const auto n = static_cast<uint32_t>(std::min(n_rows, per_piece));
    const Writer w = encoded(GetTensorRowsRequest{handle, offset, row_bytes, n});
    std::lock_guard lock(mu_);
    check_usable(Cmd::get_tensor_rows);
    throw_pending_error();
    write_frame(Cmd::get_tensor_rows, w.data().data(), w.data().size(), nullptr, 0);
    const uint32_t length = read_reply_header(Cmd::get_tensor_rows, kMaxPayload);
    payload.resize(length);
    read_payload(Cmd::get_tensor_rows, payload.data(), payload.size());
    ++round_trips_;
    GetTensorRowsReply reply;
    try {
      Reader r(payload, "GET_TENSOR_ROWS reply");
      reply = GetTensorRowsReply::decode(r, row_bytes, n);
    } catch (const Error& e) {
      fail_broken(Cmd::get_tensor_rows, std::string("malformed reply: ") + e.what());
    }
    std::memset(dst, 0, row_bytes * n);
    for (size_t i = 0; i < reply.rows.size(); ++i)
      std::memcpy(dst + reply.rows[i] * row_bytes, reply.data.data() + i * row_bytes, row_bytes);
    dst += row_bytes * n;
    offset += row_bytes * n;
    n_rows -= n;
  }
}

void Connection::graph_compute(uint32_t device, std::span<const uint8_t> graph) {
  constexpr size_t kHead = GraphComputeRequest::kHeadBytes;
  if (graph.size() > kMaxPayload - kHead) {
    fail(ErrorKind::unsupported, "rpc",
         endpoint_ + " GRAPH_COMPUTE: the graph encodes to " + std::to_string(graph.size()) +
             " bytes, over the frame limit of " + std::to_string(kMaxPayload - kHead));
  }
  const ContentHash key = content_hash(graph.data(), graph.size(), 1);
  std::lock_guard lock(mu_);
  check_usable(Cmd::graph_compute);
  // The worker keeps the last 64 graphs used (LRU); this cache keeps the
  // last kGraphCacheSize (32) used, updated in the same order as the frames
  // are written, so every id found here is still stored there (with a
  // margin of 32 for any difference in how the two count).
  ++graph_clock_;
  auto hit = std::find_if(graphs_.begin(), graphs_.end(),
                          [&](const GraphEntry& e) { return e.device == device && e.key == key; });
  const bool has_graph = hit == graphs_.end();
  uint64_t id = 0;
  if (has_graph) {
    id = next_graph_id_++;
    GraphEntry entry{key, device, id, graph_clock_};
    if (graphs_.size() < kGraphCacheSize) {
      graphs_.push_back(entry);
    } else {
      *std::min_element(graphs_.begin(), graphs_.end(),
                        [](const GraphEntry& a, const GraphEntry& b) { return a.last_use < b.last_use; }) = entry;
    }
  } else {
    id = hit->id;
    hit->last_use = graph_clock_;
  }
  Writer w;
  GraphComputeRequest{device, id, has_graph, {}}.encode_head(w);  // a new graph goes beside it, uncopied
  if (has_graph) {
    write_frame(Cmd::graph_compute, w.data().data(), w.data().size(), graph.data(), graph.size());
  } else {
    queue_frame(Cmd::graph_compute, w.data().data(), w.data().size(), nullptr, 0);  // a stored graph's id: it waits
  }
}

uint64_t Connection::acquire_event_id() {
  std::lock_guard lock(events_mu_);
  if (!free_event_ids_.empty()) {
    const uint64_t id = free_event_ids_.back();
    free_event_ids_.pop_back();
    return id;
  }
  if (next_event_id_ > kMaxEventsPerSession) return 0;
  return next_event_id_++;
}

void Connection::release_event_id(uint64_t id) {
  std::lock_guard lock(events_mu_);
  free_event_ids_.push_back(id);
}

std::vector<DeviceInfo> Connection::get_devices() {
  return call(GetDevicesRequest{}).devices;  // decode checks the count and each alignment
}

std::shared_ptr<Connection> get_connection(const std::string& endpoint, const RpcOptions& options) {
  std::shared_ptr<Slot> slot = slot_of(endpoint, true);
  std::lock_guard lock(slot->mu);
  if (auto live = slot->connection.lock(); live && !live->broken()) return live;
  auto fresh = std::make_shared<Connection>(endpoint, options);
  slot->connection = fresh;
  return fresh;
}

std::shared_ptr<Connection> find_connection(const std::string& endpoint) {
  std::shared_ptr<Slot> slot = slot_of(endpoint, false);
  if (!slot) return nullptr;
  std::lock_guard lock(slot->mu);
  return slot->connection.lock();
}

}  // namespace weft::rpc

namespace weft::rpc {

std::string Connection::peer_failure() const {
  std::lock_guard lock(peer_mu_);
  return peer_failure_;
}

Connection::PeerRoute Connection::peer_route(Connection& to) {
  {
    std::lock_guard lock(peer_mu_);
    auto it = routes_.find(to.serial_);
    if (it != routes_.end()) return it->second;
  }
  if (!has(kCapPeerLinks) || !to.has(kCapPeerLinks)) {
    PeerRoute none;
    none.failure = "peer link " + endpoint_ + " -> " + to.endpoint_ + ": a worker without peer links (protocol 1.5)";
    return none;
  }
  if (to.tls() && peer_minor_ < 8) {  // an older worker would refuse the tls:// endpoint as malformed
    PeerRoute none;
    none.failure = "peer link " + endpoint_ + " -> " + to.endpoint_ + ": " + endpoint_ + " speaks protocol 1." +
                   std::to_string(peer_minor_) + ", which cannot dial a TLS worker (1.8)";
    return none;
  }
  // No lock is held across the calls (two threads setting up the same pair
  // at once make two links; the first one recorded is used).
  // A PEER_TICKET error is the worker's deferred error or a dead
  // connection: the caller's to hear, like any reply.
  PeerConnectRequest req;
  const auto ticket = to.call(PeerTicketRequest{}).ticket;  // the same ticket every time for one session
  std::copy(ticket.begin(), ticket.end(), req.ticket.begin());
  {
    std::lock_guard lock(to.peer_mu_);
    req.source = ++to.next_source_;
  }
  {
    std::lock_guard lock(peer_mu_);
    req.link = ++next_link_;
  }
  req.endpoint = to.link_endpoint();
  req.label = endpoint_;
  try {
    call(req);
  } catch (const Error& e) {
    // Only A's own report that the link could not be made (it cannot reach
    // or authenticate to B) sends this pair through the host from now on;
    // anything else (a deferred error, a dead connection) is the caller's.
    if (std::string(e.what()).find("[PEER_CONNECT] peer link ") == std::string::npos) throw;
    std::lock_guard lock(peer_mu_);
    PeerRoute none;
    none.failure = "peer link " + endpoint_ + " -> " + to.endpoint_ + ": " + e.what();
    if (peer_failure_.empty()) peer_failure_ = none.failure;
    return routes_.emplace(to.serial_, none).first->second;
  }
  std::lock_guard lock(peer_mu_);
  return routes_.emplace(to.serial_, PeerRoute{req.link, req.source, {}}).first->second;
}

}  // namespace weft::rpc
