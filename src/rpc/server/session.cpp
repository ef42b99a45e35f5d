// The session loop: frames in, replies out, validated in the order of
// section 6 of docs/rpc-protocol.md. Handlers parse the whole payload and
// check every handle, range, device and cap before touching anything.
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

constexpr uint32_t kSetTensorFields = 24;  // handle, offset, size
constexpr char kAuthContext[] = "weft-auth-v1";
constexpr size_t kCopyChunk = size_t{16} << 20;  // staging for copies between non-host buffers
constexpr size_t kMaxDroppedGraphIds = 4096;     // remembered only for better messages
constexpr size_t kMaxPendingUploads = 64;

uint8_t kind_code(ErrorKind k) {
  switch (k) {
    case ErrorKind::invalid_input: return 0;
    case ErrorKind::unsupported: return 1;
    case ErrorKind::out_of_memory: return 2;
    case ErrorKind::disconnected: return 3;
    case ErrorKind::internal: return 4;
  }
  return 4;
}

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

void WorkerShared::log_line(const std::string& peer, const std::string& what) const {
  if (log) std::fprintf(stderr, "weft worker: session %s: %s\n", peer.c_str(), what.c_str());
}

Session::Session(WorkerShared& shared, Stream& stream) : shared_(shared), stream_(stream) {
  try {
    peer_ = stream_.peer();
  } catch (...) {
    peer_ = "?";
  }
  backends_.resize(shared_.devices.size());
  pending_work_.assign(shared_.devices.size(), false);
}

Session::~Session() {
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
  for (auto& [handle, owned] : buffers_) {
    owned.buffer.reset();
    shared_.release(owned.reserved);
  }
  buffers_.clear();
}

void Session::run() noexcept {
  std::string end;
  try {
    shared_.log_line(peer_, "connected");
    loop();
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
  try {
    shared_.log_line(peer_, end + " (session ended, " + std::to_string(buffers_.size()) + " buffers freed)");
  } catch (...) {
  }
}

void Session::loop() {
  for (;;) {
    uint8_t raw[kFrameHeaderBytes];
    try {
      stream_.read_exact(raw, sizeof raw);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::disconnected) throw;
      between_frames_ = true;  // the usual way a session ends: the client closed
      throw;
    }
    const FrameHeader h = decode_header(raw);
    std::string name = "frame";
    bool closing = false;
    try {
      // 1. The header: a command the client may send, under its limit, flags 0, allowed now.
      if (!is_known(h.command) || h.command == static_cast<uint16_t>(Cmd::error) || (h.command & kReplyBit) != 0) {
        fail(ErrorKind::invalid_input, "frame", "unknown command " + hex16(h.command));
      }
      const Cmd c = static_cast<Cmd>(h.command);
      current_ = c;
      name = cmd_name(h.command);
      if (h.length > payload_limit(c)) {
        fail(ErrorKind::invalid_input, name,
             "payload of " + std::to_string(h.length) + " bytes is over the limit of " +
                 std::to_string(payload_limit(c)));
      }
      if (h.flags != 0) fail(ErrorKind::invalid_input, name, "flags " + hex16(h.flags) + " (must be 0)");
      if (state_ == State::hello && c != Cmd::hello) {
        fail(ErrorKind::invalid_input, name, "not allowed before HELLO");
      }
      if (state_ == State::auth && c != Cmd::auth) {
        fail(ErrorKind::invalid_input, name, "not allowed before authentication");
      }
      if (state_ == State::ready && (c == Cmd::hello || c == Cmd::auth)) {
        fail(ErrorKind::invalid_input, name, "the handshake is already done");
      }
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
      } else if (has_reply(current_)) {
        send_error(e.kind(), message);
      } else {
        defer(Error(e.kind(), message));
      }
    } catch (const std::bad_alloc&) {
      const std::string message = "[" + name + "] out of host memory";
      if (has_reply(current_)) {
        send_error(ErrorKind::out_of_memory, message);
      } else {
        defer(Error(ErrorKind::out_of_memory, message));
      }
    }
    if (closing) return;
  }
}

void Session::read_payload(uint32_t length) {
  payload_.resize(length);  // length is already under the command's limit
  if (length > 0) stream_.read_exact(payload_.data(), length);
}

void Session::dispatch(Cmd c, uint32_t length) {
  if (c == Cmd::set_tensor) return on_set_tensor(length);  // reads its own payload, into the buffer
  read_payload(length);
  switch (c) {
    case Cmd::hello: return on_hello();
    case Cmd::auth: return on_auth();
    case Cmd::get_devices: return on_get_devices();
    case Cmd::alloc_buffer: return on_alloc_buffer();
    case Cmd::free_buffer: return on_free_buffer();
    case Cmd::clear_buffer: return on_clear_buffer();
    case Cmd::set_tensor_hash: return on_set_tensor_hash();
    case Cmd::get_tensor: return on_get_tensor();
    case Cmd::copy_tensor: return on_copy_tensor();
    case Cmd::memset_tensor: return on_memset_tensor();
    case Cmd::graph_compute: return on_graph_compute();
    case Cmd::synchronize: return on_synchronize();
    case Cmd::event_record: return on_event_record();
    case Cmd::event_wait: return on_event_wait();
    case Cmd::event_sync: return on_event_sync();
    case Cmd::ping: return on_ping();
    default: fail(ErrorKind::invalid_input, "frame", "unknown command " + hex16(static_cast<uint16_t>(c)));
  }
}

// --- handshake ---

void Session::on_hello() {
  Reader r(payload_, "HELLO");
  const auto magic = r.bytes(4);
  const uint16_t major = r.u16();
  (void)r.u16();  // minor: 1.0 defines nothing a larger minor changes
  const uint64_t caps = r.u64();
  r.expect_end();
  if (std::memcmp(magic.data(), kMagic, 4) != 0) {
    char got[16];
    std::snprintf(got, sizeof got, "%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    fail(ErrorKind::invalid_input, "HELLO", std::string("bad magic 0x") + got + " (expected \"WEFT\")");
  }
  if (major != kMajor) {
    fail(ErrorKind::unsupported, "HELLO",
         "protocol major version " + std::to_string(major) + " (this worker speaks " + std::to_string(kMajor) + "." +
             std::to_string(kMinor) + ")");
  }
  const bool auth = shared_.auth_secret.has_value();
  if (auth && RAND_bytes(challenge_, sizeof challenge_) != 1) {
    fail(ErrorKind::internal, "HELLO", "cannot draw a random challenge");
  }
  const uint64_t ours = kCapEvents | (shared_.cache != nullptr ? uint64_t{kCapTensorCache} : 0);
  Writer w;
  w.bytes(kMagic, 4);
  w.u16(kMajor);
  w.u16(kMinor);
  w.u64(caps & ours);
  w.u8(auth ? 1 : 0);
  w.bytes(challenge_, sizeof challenge_);  // zeros without auth
  reply(w);
  state_ = auth ? State::auth : State::ready;
}

void Session::on_auth() {
  Reader r(payload_, "AUTH");
  const auto mac = r.bytes(kAuthMacBytes);
  r.expect_end();
  uint8_t message[sizeof kAuthContext - 1 + kChallengeBytes];
  std::memcpy(message, kAuthContext, sizeof kAuthContext - 1);
  std::memcpy(message + sizeof kAuthContext - 1, challenge_, kChallengeBytes);
  const std::string& key = *shared_.auth_secret;
  unsigned char expected[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message, sizeof message, expected, &n) ==
          nullptr ||
      n != kAuthMacBytes) {
    fail(ErrorKind::internal, "AUTH", "HMAC-SHA256 failed");
  }
  if (CRYPTO_memcmp(expected, mac.data(), kAuthMacBytes) != 0) {
    fail(ErrorKind::invalid_input, "AUTH", "authentication failed");
  }
  state_ = State::ready;
  reply_empty();
}

// --- devices and buffers ---

void Session::on_get_devices() {
  Reader r(payload_, "GET_DEVICES");
  r.expect_end();
  if (answer_deferred()) return;
  auto capped = [](std::string s) {
    if (s.size() > kMaxString) s.resize(kMaxString);
    return s;
  };
  Writer w;
  w.u32(static_cast<uint32_t>(shared_.devices.size()));
  for (Device* d : shared_.devices) {
    MemoryInfo m = d->memory();
    if (shared_.memory_budget != SIZE_MAX) {  // what this worker will actually hand out
      const size_t in_use = std::min(shared_.memory_in_use.load(), shared_.memory_budget);
      m.free = std::min(m.free, shared_.memory_budget - in_use);
      m.total = std::min(m.total, shared_.memory_budget);
    }
    BufferType& bt = d->default_buffer_type();
    w.str(capped(d->name()));
    w.str(capped(d->description()));
    w.u8(d->kind() == DeviceKind::cpu ? 0 : 1);  // the protocol knows cpu and gpu; anything else is not host
    w.u64(m.free);
    w.u64(m.total);
    w.str(capped(bt.name()));
    w.u64(bt.alignment());
    w.u64(bt.max_size());
  }
  reply(w);
}

void Session::on_alloc_buffer() {
  Reader r(payload_, "ALLOC_BUFFER");
  const uint32_t device = r.u32();
  const uint64_t size = r.u64();
  r.expect_end();
  check_device(device);
  if (buffers_.size() >= kMaxBuffersPerSession) {
    fail(ErrorKind::invalid_input, "ALLOC_BUFFER",
         "the session already holds " + std::to_string(buffers_.size()) + " live buffers (the cap)");
  }
  if (answer_deferred()) return;
  BufferType& bt = shared_.devices[device]->default_buffer_type();
  if (size > bt.max_size()) {
    fail(ErrorKind::out_of_memory, "ALLOC_BUFFER",
         std::to_string(size) + " bytes is over device " + std::to_string(device) + "'s maximum buffer size " +
             std::to_string(bt.max_size()));
  }
  if (!shared_.try_reserve(size)) {
    fail(ErrorKind::out_of_memory, "ALLOC_BUFFER",
         std::to_string(size) + " bytes do not fit the worker's memory budget (" +
             std::to_string(shared_.memory_in_use.load()) + " of " + std::to_string(shared_.memory_budget) +
             " bytes in use)");
  }
  std::unique_ptr<Buffer> buffer;
  try {
    buffer = bt.allocate(size);
    if (buffer == nullptr) fail(ErrorKind::out_of_memory, "ALLOC_BUFFER", "cannot allocate " + std::to_string(size));
  } catch (...) {
    shared_.release(size);
    throw;
  }
  const uint64_t handle = shared_.next_handle.fetch_add(1, std::memory_order_relaxed);
  buffers_.emplace(handle, Owned{std::move(buffer), size});
  Writer w;
  w.u64(handle);
  reply(w);
}

void Session::on_free_buffer() {
  Reader r(payload_, "FREE_BUFFER");
  const uint64_t handle = r.u64();
  r.expect_end();
  live_buffer(handle);
  sync_all();  // nothing may still run on it
  drop_graphs_using(handle);
  std::erase_if(uploads_, [&](const PendingUpload& u) { return u.handle == handle; });
  auto it = buffers_.find(handle);
  const size_t reserved = it->second.reserved;
  buffers_.erase(it);
  shared_.release(reserved);
}

void Session::on_clear_buffer() {
  Reader r(payload_, "CLEAR_BUFFER");
  const uint64_t handle = r.u64();
  const uint8_t value = r.u8();
  r.expect_end();
  Buffer& b = live_buffer(handle);
  sync_all();
  b.clear(value);
}

// --- tensor data ---

void Session::on_set_tensor(uint32_t length) {
  // Only the fields go through payload_; the bytes go straight into the buffer.
  read_payload(std::min(length, kSetTensorFields));
  Reader r(payload_, "SET_TENSOR");
  const uint64_t handle = r.u64();
  const uint64_t offset = r.u64();
  const uint64_t size = r.u64();
  if (size != length - kSetTensorFields) {
    fail(ErrorKind::invalid_input, "SET_TENSOR",
         "size field says " + std::to_string(size) + " bytes but the frame carries " +
             std::to_string(length - kSetTensorFields));
  }
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  if (b.type().is_host()) {
    if (size > 0) stream_.read_exact(static_cast<uint8_t*>(b.base()) + offset, size);
  } else {
    read_payload(static_cast<uint32_t>(size));
    write_bytes(b, offset, payload_.data(), size);
  }
  advance_upload(handle, offset, size);
}

void Session::on_set_tensor_hash() {
  Reader r(payload_, "SET_TENSOR_HASH");
  const uint64_t handle = r.u64();
  const uint64_t offset = r.u64();
  const uint64_t size = r.u64();
  ContentHash hash;
  const auto h = r.bytes(kHashBytes);
  std::copy(h.begin(), h.end(), hash.begin());
  r.expect_end();
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  if (answer_deferred()) return;
  bool found = false;
  // Without a cache directory every lookup misses: found = 0 is always a correct answer.
  if (shared_.cache != nullptr) {
    if (b.type().is_host()) {
      found = shared_.cache->lookup(hash, size, static_cast<uint8_t*>(b.base()) + offset);
    } else {
      std::vector<uint8_t> staging(size);
      found = shared_.cache->lookup(hash, size, staging.data());
      if (found) write_bytes(b, offset, staging.data(), size);
    }
    if (!found) {
      std::erase_if(uploads_, [&](const PendingUpload& u) { return u.handle == handle && u.offset == offset; });
      uploads_.push_back(PendingUpload{hash, handle, offset, size, 0});
      if (uploads_.size() > kMaxPendingUploads) uploads_.pop_front();
    }
  }
  Writer w;
  w.u8(found ? 1 : 0);
  reply(w);
}

// The bytes announced by a SET_TENSOR_HASH miss may come in several
// SET_TENSOR frames, in order. Once all arrived, what the buffer holds is
// offered to the cache, which hashes it itself: bytes that do not match the
// announced hash (a lying client, or writes in between) are not stored.
void Session::advance_upload(uint64_t handle, uint64_t offset, uint64_t size) {
  if (shared_.cache == nullptr) return;
  for (auto it = uploads_.begin(); it != uploads_.end(); ++it) {
    if (it->handle != handle || offset != it->offset + it->received || size > it->size - it->received) continue;
    it->received += size;
    if (it->received < it->size) return;
    const PendingUpload done = *it;
    uploads_.erase(it);
    try {
      Buffer& b = *buffers_.at(handle).buffer;
      if (b.type().is_host()) {
        shared_.cache->store(done.hash, static_cast<uint8_t*>(b.base()) + done.offset, done.size);
      } else {
        std::vector<uint8_t> staging(done.size);
        read_bytes(b, done.offset, staging.data(), done.size);
        shared_.cache->store(done.hash, staging.data(), done.size);
      }
    } catch (...) {
      // The cache is an optimization: failing to fill it is not the client's error.
    }
    return;
  }
}

void Session::on_get_tensor() {
  Reader r(payload_, "GET_TENSOR");
  const uint64_t handle = r.u64();
  const uint64_t offset = r.u64();
  const uint64_t size = r.u64();
  r.expect_end();
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  if (size > UINT32_MAX) {
    fail(ErrorKind::invalid_input, "GET_TENSOR",
         "size " + std::to_string(size) + " does not fit one reply frame (split the read)");
  }
  sync_all();
  if (answer_deferred()) return;
  FrameHeader fh;
  fh.length = static_cast<uint32_t>(size);
  fh.command = static_cast<uint16_t>(Cmd::get_tensor) | kReplyBit;
  uint8_t raw[kFrameHeaderBytes];
  encode_header(fh, raw);
  if (b.type().is_host()) {
    stream_.write_all(raw, sizeof raw, static_cast<uint8_t*>(b.base()) + offset, size);
  } else {
    std::vector<uint8_t> staging(size);
    read_bytes(b, offset, staging.data(), size);
    stream_.write_all(raw, sizeof raw, staging.data(), size);
  }
}

void Session::on_copy_tensor() {
  Reader r(payload_, "COPY_TENSOR");
  const uint64_t src_handle = r.u64();
  const uint64_t src_offset = r.u64();
  const uint64_t dst_handle = r.u64();
  const uint64_t dst_offset = r.u64();
  const uint64_t size = r.u64();
  r.expect_end();
  Buffer& src = live_buffer(src_handle);
  Buffer& dst = live_buffer(dst_handle);
  check_range(src, src_handle, src_offset, size);
  check_range(dst, dst_handle, dst_offset, size);
  sync_all();
  if (size == 0) return;
  if (src.type().is_host() && dst.type().is_host()) {
    std::memmove(static_cast<uint8_t*>(dst.base()) + dst_offset, static_cast<uint8_t*>(src.base()) + src_offset,
                 size);
    return;
  }
  // Through host memory, chunk by chunk; backwards when an overlap needs it (as memmove).
  std::vector<uint8_t> staging(std::min<uint64_t>(size, kCopyChunk));
  const bool backwards = &src == &dst && dst_offset > src_offset;
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(staging.size(), size - done);
    const uint64_t at = backwards ? size - done - n : done;
    read_bytes(src, src_offset + at, staging.data(), n);
    write_bytes(dst, dst_offset + at, staging.data(), n);
    done += n;
  }
}

void Session::on_memset_tensor() {
  Reader r(payload_, "MEMSET_TENSOR");
  const uint64_t handle = r.u64();
  const uint64_t offset = r.u64();
  const uint64_t size = r.u64();
  const uint8_t value = r.u8();
  r.expect_end();
  Buffer& b = live_buffer(handle);
  check_range(b, handle, offset, size);
  sync_all();
  if (size == 0) return;
  if (b.type().is_host()) {
    std::memset(static_cast<uint8_t*>(b.base()) + offset, value, size);
  } else {
    Tensor t = byte_view(b);
    b.memset_tensor(t, value, offset, size);
  }
}

// --- graphs ---

void Session::on_graph_compute() {
  Reader r(payload_, "GRAPH_COMPUTE");
  const uint32_t device = r.u32();
  const uint64_t graph_id = r.u64();
  const uint8_t has_graph = r.u8();
  if (has_graph > 1) {
    fail(ErrorKind::invalid_input, "GRAPH_COMPUTE", "has_graph is " + std::to_string(has_graph) + " (must be 0 or 1)");
  }
  if (has_graph == 0) r.expect_end();
  check_device(device);
  Device& dev = *shared_.devices[device];
  StoredGraph* stored = nullptr;
  if (has_graph == 1) {
    std::vector<uint64_t> used;
    auto buffer_of = [&](uint64_t handle) -> Buffer* {
      auto it = buffers_.find(handle);
      if (it == buffers_.end()) return nullptr;
      used.push_back(handle);
      return it->second.buffer.get();
    };
    auto supports = [&](const Tensor& t) { return dev.supports_op(t); };
    std::unique_ptr<DecodedGraph> decoded = decode_graph(r, buffer_of, supports);
    r.expect_end();
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    for (uint64_t handle : used) {
      BufferType& bt = buffers_.at(handle).buffer->type();
      if (!dev.supports_buffer_type(bt)) {
        fail(ErrorKind::invalid_input, "GRAPH_COMPUTE",
             "buffer " + std::to_string(handle) + " (" + bt.name() + ") cannot be read by device " +
                 std::to_string(device) + " (" + dev.name() + ")");
      }
    }
    auto same = graphs_.find(graph_id);
    if (same != graphs_.end()) {
      sync_device(same->second.device);  // it may still be running
      graphs_.erase(same);
    } else if (graphs_.size() >= kMaxGraphsPerSession) {
      auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                  [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
      sync_device(lru->second.device);
      graphs_.erase(lru);
    }
    dropped_graphs_.erase(graph_id);
    stored = &graphs_[graph_id];
    stored->graph = std::move(decoded);
    stored->device = device;
    stored->handles = std::move(used);
  } else {
    auto it = graphs_.find(graph_id);
    if (it == graphs_.end()) {
      auto dropped = dropped_graphs_.find(graph_id);
      if (dropped != dropped_graphs_.end()) {
        fail(ErrorKind::invalid_input, "GRAPH_COMPUTE",
             "graph " + std::to_string(graph_id) + " was dropped: buffer " + std::to_string(dropped->second) +
                 " it uses was freed");
      }
      fail(ErrorKind::invalid_input, "GRAPH_COMPUTE",
           "no stored graph " + std::to_string(graph_id) + " (send it with has_graph = 1)");
    }
    if (it->second.device != device) {
      fail(ErrorKind::invalid_input, "GRAPH_COMPUTE",
           "graph " + std::to_string(graph_id) + " was built for device " + std::to_string(it->second.device) +
               ", not device " + std::to_string(device));
    }
    stored = &it->second;
  }
  stored->last_use = ++use_clock_;
  Backend& be = backend(device);
  pending_work_[device] = true;
  try {
    be.compute(stored->graph->graph);
  } catch (...) {
    defer_current_exception();  // a kernel's failure is not the client's: reported by the next reply
  }
}

void Session::drop_graphs_using(uint64_t handle) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    const auto& hs = it->second.handles;
    if (std::binary_search(hs.begin(), hs.end(), handle)) {
      sync_device(it->second.device);
      if (dropped_graphs_.size() >= kMaxDroppedGraphIds) dropped_graphs_.clear();
      dropped_graphs_[it->first] = handle;
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
}

void Session::on_synchronize() {
  Reader r(payload_, "SYNCHRONIZE");
  const uint32_t device = r.u32();
  r.expect_end();
  check_device(device);
  sync_device(device);
  if (answer_deferred()) return;
  reply_empty();
}

// --- events ---
// Commands run in order, so a record only remembers its device; a wait or
// sync waits for that device's stream (conservatively: all of it so far).

void Session::on_event_record() {
  Reader r(payload_, "EVENT_RECORD");
  const uint32_t device = r.u32();
  const uint64_t id = r.u64();
  r.expect_end();
  check_device(device);
  if (events_.find(id) == events_.end() && events_.size() >= kMaxEventsPerSession) {
    fail(ErrorKind::invalid_input, "EVENT_RECORD",
         "event " + std::to_string(id) + " would pass the cap of " + std::to_string(kMaxEventsPerSession) +
             " events per session");
  }
  events_[id] = device;
}

void Session::on_event_wait() {
  Reader r(payload_, "EVENT_WAIT");
  const uint32_t device = r.u32();
  const uint64_t id = r.u64();
  r.expect_end();
  check_device(device);
  auto it = events_.find(id);
  if (it != events_.end() && it->second != device) sync_device(it->second);  // one stream is in order already
}

void Session::on_event_sync() {
  Reader r(payload_, "EVENT_SYNC");
  const uint64_t id = r.u64();
  r.expect_end();
  auto it = events_.find(id);
  if (it != events_.end()) sync_device(it->second);  // never recorded: already passed
  if (answer_deferred()) return;
  reply_empty();
}

void Session::on_ping() {
  Reader r(payload_, "PING");
  r.expect_end();
  if (answer_deferred()) return;
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
  stream_.write_all(raw, sizeof raw, data.data(), data.size());
}

void Session::reply_empty() { reply(Writer()); }

void Session::send_error(ErrorKind kind, const std::string& message) {
  Writer w;
  w.u8(kind_code(kind));
  w.str(message.size() > kMaxString ? std::string_view(message).substr(0, kMaxString) : std::string_view(message));
  FrameHeader fh;
  fh.length = static_cast<uint32_t>(w.data().size());
  fh.command = static_cast<uint16_t>(Cmd::error);
  uint8_t raw[kFrameHeaderBytes];
  encode_header(fh, raw);
  stream_.write_all(raw, sizeof raw, w.data().data(), w.data().size());
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

}  // namespace weft::rpc
