// The session loop: frames in, replies out, validated in the order of
// section 6 of docs/rpc-protocol.md; the handshake; replies, errors and the
// deferred error; ordering against the backends; byte access to buffers.
// The command handlers are in session_data.cpp and session_graph.cpp: each
// parses the whole payload and checks every handle, range, device and cap
// before touching anything.
#include "server/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "server/tensor_cache.h"

namespace weft::rpc {
namespace {

constexpr char kAuthContext[] = "weft-auth-v1";

std::string hex16(uint16_t v) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%04x", v);
  return s;
}

// weft has no byte dtype, so a non-host buffer is reached through its
// set/get/memset with an i32 tensor of ceil(size / 4) elements at base():
// its nbytes() may pass the buffer's end by up to 3 bytes, which no access
// made here touches (every range is checked against the buffer size first).
Tensor byte_view(Buffer& b) {
  Tensor t;
  t.type = DType::i32;
  t.ne[0] = static_cast<int64_t>((b.size() + 3) / 4);
  set_packed_strides(t);
  t.buffer = &b;
  t.data = b.base();
  t.name = "rpc bytes";
  return t;
}

}  // namespace

bool WorkerShared::try_reserve(size_t n) {
  size_t cur = memory_in_use.load(std::memory_order_acquire);
  do {
    if (n > memory_budget || cur > memory_budget - n) return false;
  } while (!memory_in_use.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  return true;
}

bool WorkerShared::computes(const Device& device, const Tensor& node) const {
  const auto op = static_cast<unsigned>(node.op);
  if (op < 64 && ((refused_ops >> op) & 1) != 0) return false;
  return device.supports_op(node);
}

void WorkerShared::log_line(const std::string& peer, const std::string& what) const {
  if (log) std::fprintf(stderr, "weft worker: session %s: %s\n", peer.c_str(), what.c_str());
}

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Session::Session(WorkerShared& shared, Stream& stream, SessionStatus* status)
    : shared_(shared),
      stream_(stream),
      status_(status != nullptr ? *status : own_status_),
      handshake_deadline_(std::chrono::steady_clock::now() + shared.limits.handshake_timeout) {
  try {
    peer_ = stream_.peer();
  } catch (...) {
    peer_ = "?";
  }
  backends_.resize(shared_.devices.size());
  pending_work_.assign(shared_.devices.size(), false);
  graphs_run_.assign(shared_.devices.size(), 0);
  compute_ns_.assign(shared_.devices.size(), 0);
  scratch_charged_.assign(shared_.devices.size(), 0);
}

Session::~Session() {
  end_peer_links("the session ended");
  // Work still queued may read or write the buffers: wait for it first.
  for (size_t d = 0; d < backends_.size(); ++d) {
    if (backends_[d] == nullptr) continue;
    try {
      backends_[d]->synchronize();
    } catch (...) {
    }
  }
  graphs_.clear();
  backends_.clear();
  buffers_.clear();
  shared_.release(charged_);  // everything the session held, buffers included
}

void Session::charge(size_t n, const std::string& what) {
  if (n == 0) return;
  const size_t cap = shared_.limits.session_memory;
  if (n > cap || charged_ > cap - n) {
    fail(ErrorKind::out_of_memory, cmd_name(static_cast<uint16_t>(current_)),
         what + ": " + std::to_string(n) + " bytes would pass the session's limit (" + std::to_string(charged_) +
             " of " + std::to_string(cap) + " bytes in use)");
  }
  if (!shared_.try_reserve(n)) {
    fail(ErrorKind::out_of_memory, cmd_name(static_cast<uint16_t>(current_)),
         what + ": " + std::to_string(n) + " bytes do not fit the worker's memory budget (" +
             std::to_string(shared_.memory_in_use.load()) + " of " + std::to_string(shared_.memory_budget) +
             " bytes in use)");
  }
  charged_ += n;
}

void Session::refund(size_t n) {
  charged_ -= n;
  shared_.release(n);
}

void Session::shrink_payload() {
  constexpr size_t kKeptPayload = size_t{1} << 20;  // small frames reuse one allocation
  if (payload_.capacity() <= kKeptPayload) return;
  std::vector<uint8_t>().swap(payload_);
  refund(payload_charged_);
  payload_charged_ = 0;
}

void Session::update_status() {
  // A peer link holds state only while an event it pushed waits to be
  // taken; idle, it gives its place up like any session that holds nothing.
  const bool link_holds = state_ == State::peer && attached_ && attached_->waiting(source_);
  status_.holds_state.store(!buffers_.empty() || !graphs_.empty() || link_holds, std::memory_order_relaxed);
  status_.idle_since_ms.store(steady_now_ms(), std::memory_order_relaxed);
}

std::chrono::steady_clock::time_point Session::arm_header_deadline() {
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = handshaking() ? handshake_deadline_ : now + shared_.limits.idle_timeout;
  stream_.set_read_deadline(deadline);
  return deadline;
}

namespace {
// The slowest transfer a deadline allows for: a frame of n bytes gets
// io_timeout plus n at this rate.
constexpr uint64_t kMinBytesPerMs = 1024;  // 1 MiB/s
}  // namespace

void Session::arm_body_deadline(uint64_t length) {
  auto deadline = std::chrono::steady_clock::now() + shared_.limits.io_timeout +
                  std::chrono::milliseconds(length / kMinBytesPerMs);
  if (handshaking()) deadline = std::min(deadline, handshake_deadline_);
  stream_.set_read_deadline(deadline);
}

void Session::write_frame(const uint8_t* header, const void* data, size_t size) {
  std::unique_lock<std::mutex> writes;
  if (heartbeat_) writes = heartbeat_->lock_writes();
  stream_.set_write_deadline(std::chrono::steady_clock::now() + shared_.limits.io_timeout +
                             std::chrono::milliseconds(size / kMinBytesPerMs));
  stream_.write_all(header, kFrameHeaderBytes, data, size);
  if (heartbeat_) heartbeat_->wrote();
}

void Session::run() noexcept {
  std::string end;
  try {
    shared_.log_line(peer_, "connected");
    loop();
    heartbeat_.reset();
    end = end_reason_;
  } catch (const Error& e) {
    if (!end_reason_.empty()) {
      end = end_reason_;  // the ERROR reply could not be sent: the peer is gone too
    } else if (e.kind() != ErrorKind::disconnected) {
      end = std::string("internal error: ") + e.what();
    } else {
      if (shared_.stopping.load()) {
        end = "closed: the worker is stopping";
      } else {
        end = between_frames_ ? "closed by the client" : std::string("disconnected mid-frame: ") + e.what();
      }
    }
  } catch (const std::exception& e) {
    end = std::string("ended: internal error: ") + e.what();
  } catch (...) {
    end = "ended: unknown internal error";
  }
  heartbeat_.reset();  // no heartbeat after the session's last frame
  end_peer_links(end);
  try {
    shared_.log_line(peer_, end + " (session ended, " + std::to_string(buffers_.size()) + " buffers freed)");
  } catch (...) {
  }
}

bool Session::read_frame_header(uint8_t (&raw)[kFrameHeaderBytes]) {
  const auto deadline = arm_header_deadline();
  try {
    stream_.read_exact(raw, sizeof raw);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::disconnected) throw;
    between_frames_ = true;  // the usual way a session ends: the client closed
    if (std::chrono::steady_clock::now() >= deadline) {
      const auto& l = shared_.limits;
      end_reason_ = !handshaking()
                        ? "idle for " + std::to_string(l.idle_timeout.count()) + " ms (the idle timeout): closed"
                        : "handshake not done within " + std::to_string(l.handshake_timeout.count()) +
                              " ms (the handshake timeout): closed";
      return false;
    }
    throw;
  }
  return true;
}

Cmd Session::admit_frame(const FrameHeader& h, std::string& name) {
  // 1. The header: a command the client may send, under its limit, flags 0, allowed now.
  if (!is_known(h.command) || h.command == static_cast<uint16_t>(Cmd::error) || (h.command & kReplyBit) != 0) {
    fail(ErrorKind::invalid_input, "frame", "unknown command " + hex16(h.command));
  }
  const Cmd c = static_cast<Cmd>(h.command);
  current_ = c;
  name = cmd_name(h.command);
  if (h.length > payload_limit(c)) {
    fail(ErrorKind::invalid_input, name,
         "payload of " + std::to_string(h.length) + " bytes is over the limit of " + std::to_string(payload_limit(c)));
  }
  if (h.flags != 0) fail(ErrorKind::invalid_input, name, "flags " + hex16(h.flags) + " (must be 0)");
  if (state_ == State::hello && c != Cmd::hello) fail(ErrorKind::invalid_input, name, "not allowed before HELLO");
  if (state_ == State::auth && c != Cmd::auth) {
    fail(ErrorKind::invalid_input, name, "not allowed before authentication");
  }
  if (!handshaking() && (c == Cmd::hello || c == Cmd::auth)) {
    fail(ErrorKind::invalid_input, name, "the handshake is already done");
  }
  if (state_ == State::peer && c != Cmd::peer_push && c != Cmd::ping) {
    fail(ErrorKind::invalid_input, name, "a peer link only pushes (PEER_PUSH, PING)");
  }
  if (state_ == State::ready && c == Cmd::peer_push) {
    fail(ErrorKind::invalid_input, name, "only a peer link (after PEER_ATTACH) pushes");
  }
  return c;
}

void Session::loop() {
  for (;;) {
    uint8_t raw[kFrameHeaderBytes];
    if (heartbeat_) heartbeat_->set_busy(false);  // waiting for the client is not being busy
    if (!read_frame_header(raw)) return;
    if (heartbeat_) heartbeat_->set_busy(true);
    status_.idle_since_ms.store(0, std::memory_order_relaxed);
    const FrameHeader h = decode_header(raw);
    std::string name = "frame";
    bool closing = false;
    frame_read_ = false;
    try {
      const Cmd c = admit_frame(h, name);
      arm_body_deadline(h.length);
      dispatch(c, h.length);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::disconnected) throw;
      std::string message = e.what();
      if (message.find(name) == std::string::npos) message = "[" + name + "] " + message;
      if (e.kind() == ErrorKind::invalid_input || (current_ == Cmd::hello && e.kind() == ErrorKind::unsupported)) {
        // A malformed or hostile message (or a major version we do not speak): answer, then end.
        end_reason_ = message;
        closing = true;
        send_error(e.kind(), message);
      } else if (!frame_read_) {
        // Part of the payload is still unread: the stream cannot be trusted any further.
        end_reason_ = message;
        closing = true;
        send_error(e.kind(), message);
      } else if (has_reply(current_)) {
        send_error(e.kind(), message);
      } else {
        defer(Error(e.kind(), message));
      }
    } catch (const std::bad_alloc&) {
      const std::string message = "[" + name + "] out of host memory";
      if (!frame_read_) {
        end_reason_ = message;
        closing = true;
        send_error(ErrorKind::out_of_memory, message);
      } else if (has_reply(current_)) {
        send_error(ErrorKind::out_of_memory, message);
      } else {
        defer(Error(ErrorKind::out_of_memory, message));
      }
    }
    if (closing || refused_) return;
    shrink_payload();
    update_status();
  }
}

void Session::read_payload(uint32_t length) {
  // length is already under the command's limit; the memory is charged first.
  if (length > payload_charged_) {
    charge(length - payload_charged_, "a frame's payload");
    payload_charged_ = length;
  }
  payload_.reserve(payload_charged_);
  payload_.resize(length);
  if (length > 0) stream_.read_exact(payload_.data(), length);
}

void Session::dispatch(Cmd c, uint32_t length) {
  if (c == Cmd::set_tensor) return on_set_tensor(length);  // reads its own payload, into the buffer
  read_payload(length);
  frame_read_ = true;
  switch (c) {
    case Cmd::hello: return on_hello();
    case Cmd::auth: return on_auth();
    case Cmd::get_devices: return on_get_devices();
    case Cmd::alloc_buffer: return on_alloc_buffer();
    case Cmd::free_buffer: return on_free_buffer();
    case Cmd::clear_buffer: return on_clear_buffer();
    case Cmd::supports_op: return on_supports_op();
    case Cmd::set_tensor_hash: return on_set_tensor_hash();
    case Cmd::get_tensor: return on_get_tensor();
    case Cmd::copy_tensor: return on_copy_tensor();
    case Cmd::memset_tensor: return on_memset_tensor();
    case Cmd::set_tensor_rows: return on_set_tensor_rows();
    case Cmd::get_tensor_rows: return on_get_tensor_rows();
    case Cmd::graph_compute: return on_graph_compute();
    case Cmd::synchronize: return on_synchronize();
    case Cmd::compute_stats: return on_compute_stats();
    case Cmd::event_record: return on_event_record();
    case Cmd::event_wait: return on_event_wait();
    case Cmd::event_sync: return on_event_sync();
    case Cmd::ping: return on_ping();
    case Cmd::peer_ticket: return on_peer_ticket();
    case Cmd::peer_connect: return on_peer_connect();
    case Cmd::peer_attach: return on_peer_attach();
    case Cmd::peer_push: return on_peer_push();
    case Cmd::push_to_peer: return on_push_to_peer();
    case Cmd::peer_wait: return on_peer_wait();
    default: fail(ErrorKind::invalid_input, "frame", "unknown command " + hex16(static_cast<uint16_t>(c)));
  }
}

// --- handshake ---

void Session::on_hello() {
  const auto hello = parse<HelloRequest>(payload_);
  const Magic& magic = hello.magic;
  if (magic != kMagicBytes) {
    char got[16];
    std::snprintf(got, sizeof got, "%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    fail(ErrorKind::invalid_input, "HELLO", std::string("bad magic 0x") + got + " (expected \"WEFT\")");
  }
  if (hello.major != kMajor) {
    fail(ErrorKind::unsupported, "HELLO",
         "protocol major version " + std::to_string(hello.major) + " (this worker speaks " + std::to_string(kMajor) +
             "." + std::to_string(kMinor) + ")");
  }
  // The minor needs no check: a smaller one simply never sends what it lacks.
  const bool auth = shared_.auth_secret.has_value();
  if (auth && RAND_bytes(challenge_, sizeof challenge_) != 1) {
    fail(ErrorKind::internal, "HELLO", "cannot draw a random challenge");
  }
  const uint64_t ours = kCapEvents | kCapOpSupport | kCapPeerLinks | kCapHeartbeat |
                        (shared_.cache != nullptr ? uint64_t{kCapTensorCache} : 0);
  HelloReply r;
  r.capabilities = hello.capabilities & ours;
  r.auth_required = auth;
  std::copy(std::begin(challenge_), std::end(challenge_), r.challenge.begin());  // zeros without auth
  if (!auth && !admit()) return;
  reply(r);
  state_ = auth ? State::auth : State::ready;
  // After the HELLO reply, so that the client's first frame is the reply.
  if ((r.capabilities & kCapHeartbeat) != 0) heartbeat_ = std::make_unique<Heartbeat>(stream_, shared_.limits.io_timeout);
}

bool Session::admit() {
  if (!shared_.admit || shared_.admit(status_)) {
    status_.ready.store(true);
    return true;
  }
  end_reason_ = "turned away: the worker is busy (every client slot holds a session)";
  refused_ = true;
  std::string message = "[";  // appended: GCC 12 misreads "[" + std::string&& (-Wrestrict)
  message += cmd_name(static_cast<uint16_t>(current_));
  message += "] busy: every client slot of this worker holds a session; try later";
  send_error(ErrorKind::out_of_memory, message);
  return false;
}

void Session::on_auth() {
  const auto mac = parse<AuthRequest>(payload_).mac;
  uint8_t message[sizeof kAuthContext - 1 + kChallengeBytes];
  std::memcpy(message, kAuthContext, sizeof kAuthContext - 1);
  std::memcpy(message + sizeof kAuthContext - 1, challenge_, kChallengeBytes);
  const std::string& key = *shared_.auth_secret;
  unsigned char expected[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message, sizeof message, expected, &n) == nullptr ||
      n != kAuthMacBytes) {
    fail(ErrorKind::internal, "AUTH", "HMAC-SHA256 failed");
  }
  if (CRYPTO_memcmp(expected, mac.data(), kAuthMacBytes) != 0) {
    fail(ErrorKind::invalid_input, "AUTH", "authentication failed");
  }
  if (!admit()) return;
  state_ = State::ready;
  reply_empty();
}

// --- helpers ---

Buffer& Session::live_buffer(uint64_t handle) {
  const char* name = cmd_name(static_cast<uint16_t>(current_));
  if (handle == 0) fail(ErrorKind::invalid_input, name, "handle 0 is never a buffer");
  auto it = buffers_.find(handle);
  if (it == buffers_.end()) {
    fail(ErrorKind::invalid_input, name, "handle " + std::to_string(handle) + " is not a live buffer of this session");
  }
  return *it->second.buffer;
}

void Session::check_range(Buffer& b, uint64_t handle, uint64_t offset, uint64_t size) {
  const uint64_t n = b.size();
  if (offset > n || size > n - offset) {
    fail(ErrorKind::invalid_input, cmd_name(static_cast<uint16_t>(current_)),
         "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside buffer " +
             std::to_string(handle) + " (" + std::to_string(n) + " bytes)");
  }
}

void Session::check_device(uint32_t device) {
  if (device >= shared_.devices.size()) {
    fail(ErrorKind::invalid_input, cmd_name(static_cast<uint16_t>(current_)),
         "device " + std::to_string(device) + " is out of range (" + std::to_string(shared_.devices.size()) +
             " devices)");
  }
}

void Session::reply(const Writer& w) {
  const auto& data = w.data();
  FrameHeader fh;
  fh.length = static_cast<uint32_t>(data.size());
  fh.command = static_cast<uint16_t>(current_) | kReplyBit;
  uint8_t raw[kFrameHeaderBytes];
  encode_header(fh, raw);
  write_frame(raw, data.data(), data.size());
}

void Session::reply_empty() {
  reply(Writer());
}

void Session::send_error(ErrorKind kind, const std::string& message) {
  const Writer w = encoded(ErrorReply{kind, message});  // cut to kMaxString
  FrameHeader fh;
  fh.length = static_cast<uint32_t>(w.data().size());
  fh.command = static_cast<uint16_t>(Cmd::error);
  uint8_t raw[kFrameHeaderBytes];
  encode_header(fh, raw);
  write_frame(raw, w.data().data(), w.data().size());
}

bool Session::answer_deferred() {
  if (!deferred_) return false;
  const Error e = *deferred_;
  deferred_.reset();
  send_error(e.kind(), e.what());
  return true;
}

void Session::defer(const Error& e) {
  if (deferred_) return;  // the first failure is the one worth reporting
  // Work that was validated cannot fail by the client's fault: never an invalid_input here.
  const ErrorKind kind = e.kind() == ErrorKind::invalid_input ? ErrorKind::internal : e.kind();
  deferred_.emplace(kind, e.what());
}

void Session::defer_current_exception() {
  const std::string name = cmd_name(static_cast<uint16_t>(current_));
  try {
    throw;
  } catch (const Error& e) {
    defer(e);
  } catch (const std::bad_alloc&) {
    defer(Error(ErrorKind::out_of_memory, "[" + name + "] out of host memory"));
  } catch (const std::exception& e) {
    defer(Error(ErrorKind::internal, "[" + name + "] " + e.what()));
  } catch (...) {
    defer(Error(ErrorKind::internal, "[" + name + "] unknown error"));
  }
}

Backend& Session::backend(uint32_t device) {
  if (backends_[device] == nullptr) backends_[device] = shared_.devices[device]->create_backend();
  return *backends_[device];
}

void Session::sync_device(uint32_t device) {
  if (backends_[device] == nullptr || !pending_work_[device]) return;
  pending_work_[device] = false;
  try {
    backends_[device]->synchronize();
  } catch (...) {
    defer_current_exception();
  }
}

void Session::sync_all() {
  for (uint32_t d = 0; d < backends_.size(); ++d) sync_device(d);
}

void Session::write_bytes(Buffer& b, uint64_t offset, const void* data, size_t size) {
  if (size == 0) return;
  if (b.type().is_host()) {
    std::memcpy(static_cast<uint8_t*>(b.base()) + offset, data, size);
  } else {
    Tensor t = byte_view(b);
    b.set_tensor(t, data, offset, size);
  }
}

void Session::read_bytes(Buffer& b, uint64_t offset, void* data, size_t size) {
  if (size == 0) return;
  if (b.type().is_host()) {
    std::memcpy(data, static_cast<const uint8_t*>(b.base()) + offset, size);
  } else {
    Tensor t = byte_view(b);
    b.get_tensor(t, data, offset, size);
  }
}

void Session::fill_bytes(Buffer& b, uint64_t offset, uint8_t value, size_t size) {
  if (size == 0) return;
  if (b.type().is_host()) {
    std::memset(static_cast<uint8_t*>(b.base()) + offset, value, size);
  } else {
    Tensor t = byte_view(b);
    b.memset_tensor(t, value, offset, size);
  }
}

}  // namespace weft::rpc
