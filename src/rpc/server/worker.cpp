// The worker: a listener thread accepts connections and gives each one a
// session thread. Sessions share only WorkerShared (devices, the memory
// budget, the tensor cache), which is thread-safe.
#include "weft/rpc/worker.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <thread>

#include "protocol/wire.h"
#include "server/session.h"
#include "server/advertiser.h"
#include "server/tensor_cache.h"
#include "server/worker_testing.h"
#include "transport/tls.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

bool is_loopback(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace

struct Worker::Impl {
  // One connection being served: by a thread of ours (owned set) or by a
  // caller of serve() (owned null, no thread).
  struct Slot {
    std::unique_ptr<Stream> owned;
    std::unique_ptr<Stream> tls;  // over owned, once its TLS handshake is done
    Stream* stream = nullptr;  // owned or tls; null once the session closed it; guarded by mutex
    std::thread thread;
    bool done = false;
    bool evicted = false;  // shut down to make room; guarded by mutex
    int64_t accepted_ms = 0;
    SessionStatus status;
  };

  WorkerOptions options;
  WorkerShared shared;
  std::unique_ptr<TensorCache> cache;
  std::optional<TlsServer> tls;
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Advertiser> advertiser;  // with options.advertise, once started
  std::thread accept_thread;
  std::thread monitor_thread;
  std::atomic<int> active{0};

  std::mutex mutex;  // guards everything below
  std::condition_variable changed;
  std::list<Slot> slots;
  int serving = 0;  // serve() calls in progress
  bool started = false;
  bool stopping = false;

  void accept_loop();
  void session_thread(Slot* slot);
  bool start_tls(Slot* slot);  // false: the connection is to be closed
  void join_finished();
  void make_room_for_handshake();
  bool admit(SessionStatus& status);
  void monitor_loop();
  void evict(Slot& s, const char* why);  // caller holds mutex
  Beacon beacon() const;                 // this worker's facts for --advertise
};

Worker::Worker(std::vector<Device*> devices, WorkerOptions options) : impl_(std::make_unique<Impl>()) {
  if (devices.empty() || devices.size() > kMaxDevices) {
    fail(ErrorKind::invalid_input, "worker",
         "serves 1 to " + std::to_string(kMaxDevices) + " devices, got " + std::to_string(devices.size()));
  }
  for (Device* d : devices) {
    if (d == nullptr) fail(ErrorKind::invalid_input, "worker", "a null device");
  }
  if (options.max_clients < 1) {
    fail(ErrorKind::invalid_input, "worker", "max_clients " + std::to_string(options.max_clients) + " (must be >= 1)");
  }
  if (!is_loopback(options.host) && !options.auth_secret && !options.insecure) {
    fail(ErrorKind::invalid_input, "worker",
         "refusing to listen on " + options.host +
             " without an auth secret: anyone who reaches it could use this machine (give a token file, or "
             "insecure to accept that)");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    fail(ErrorKind::invalid_input, "worker", "TLS needs both a certificate and a key file");
  }
  if (!options.tls_cert.empty()) impl_->tls = TlsServer::load(options.tls_cert, options.tls_key);
  if (!options.cache_dir.empty())
    impl_->cache = std::make_unique<TensorCache>(options.cache_dir, options.cache_max_bytes);
  impl_->shared.devices = std::move(devices);
  impl_->shared.memory_budget = options.memory_budget;
  impl_->shared.cache = impl_->cache.get();
  impl_->shared.auth_secret = options.auth_secret;
  impl_->shared.log = options.log;
  impl_->shared.limits = options.limits;
  impl_->shared.dial_policy = DialPolicy::parse(options.peer_allow, options.auth_secret.has_value());
  impl_->shared.admit = [impl = impl_.get()](SessionStatus& status) { return impl->admit(status); };
  impl_->options = std::move(options);
}

Worker::~Worker() {
  stop();
}

void Worker::start() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->started || impl_->stopping) fail(ErrorKind::invalid_input, "worker", "start() called twice");
  impl_->listener = tcp_listen(impl_->options.host, impl_->options.port);
  impl_->shared.listen_port = impl_->listener->port();  // before any session reads it
  impl_->started = true;
  impl_->accept_thread = std::thread([impl = impl_.get()] { impl->accept_loop(); });
  if (impl_->options.advertise) {
    impl_->advertiser = std::make_unique<Advertiser>(
        impl_->options.host, impl_->options.advertise_port, impl_->options.advertise_every,
        [impl = impl_.get()] { return impl->beacon(); }, impl_->options.auth_secret, impl_->options.log);
  }
  impl_->monitor_thread = std::thread([impl = impl_.get()] { impl->monitor_loop(); });
}

void Worker::Impl::evict(Slot& s, const char* why) {
  if (s.evicted || s.stream == nullptr) return;
  s.evicted = true;
  if (options.log) std::fprintf(stderr, "weft worker: session %s: %s\n", s.stream->peer().c_str(), why);
  s.stream->shutdown();  // its session ends and frees everything
}

// Connections still in their handshake take at most max_clients slots: a
// newcomer past that drops the oldest, so idle or slow connections cannot
// lock out a client that completes its handshake promptly.
void Worker::Impl::make_room_for_handshake() {
  std::lock_guard lock(mutex);
  Slot* oldest = nullptr;
  int waiting = 0;
  for (Slot& s : slots) {
    if (s.done || s.evicted || s.owned == nullptr || s.status.ready.load()) continue;
    ++waiting;
    if (oldest == nullptr || s.accepted_ms < oldest->accepted_ms) oldest = &s;
  }
  if (waiting >= options.max_clients && oldest != nullptr) {
    evict(*oldest, "dropped before its handshake finished: newer connections are waiting");
  }
}

// A session that finished its handshake takes one of max_clients places;
// when they are all taken, one that holds nothing and has been idle for a
// second gives its place up.
bool Worker::Impl::admit(SessionStatus& status) {
  std::lock_guard lock(mutex);
  if (stopping) return false;
  int admitted = 0;
  Slot* idlest = nullptr;
  const int64_t now = steady_now_ms();
  for (Slot& s : slots) {
    if (&s.status == &status || s.done || s.evicted || !s.status.ready.load()) continue;
    ++admitted;
    const int64_t since = s.status.idle_since_ms.load();
    const bool evictable = since != 0 && now - since >= 1000 && !s.status.holds_state.load() && s.owned != nullptr;
    if (evictable && (idlest == nullptr || since < idlest->status.idle_since_ms.load())) idlest = &s;
  }
  if (admitted >= options.max_clients) {
    if (idlest == nullptr) return false;
    evict(*idlest, "closed to make room: idle and holding nothing while the worker is full");
  }
  status.ready.store(true);  // under the mutex: the next admit() counts it
  return true;
}

Beacon Worker::Impl::beacon() const {
  Beacon b;
  b.port = listener ? listener->port() : 0;
  b.protocol = std::to_string(kMajor) + "." + std::to_string(kMinor);
  b.tls = tls ? tls->fingerprint() : "";
  b.auth = options.auth_secret.has_value();
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) b.name = name;
  for (Device* d : shared.devices) {
    b.devices.push_back(d->description() + ", " + std::to_string(d->memory().free >> 20) + " MiB free");
  }
  return b;
}

// Watches the peers of sessions that are computing: one whose peer closed
// gets its cancel flag set, and its compute stops at the next node.
void Worker::Impl::monitor_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex);
      if (changed.wait_for(lock, std::chrono::milliseconds(20), [&] { return stopping; })) return;
      for (Slot& s : slots) {
        if (s.stream == nullptr || !s.status.computing.load() || s.status.cancel.load()) continue;
        if (s.stream->peer_closed()) s.status.cancel.store(true);
      }
    }
  }
}

void Worker::Impl::accept_loop() {
  for (;;) {
    std::unique_ptr<Stream> s;
    try {
      s = listener->accept();
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mutex);
        if (stopping) return;
      }
      if (options.log) std::fprintf(stderr, "weft worker: accept failed: %s\n", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // e.g. out of file descriptors
      continue;
    }
    if (s == nullptr) return;  // closed
    join_finished();
    make_room_for_handshake();
    std::lock_guard lock(mutex);
    if (stopping) return;
    Slot& slot = slots.emplace_back();
    slot.stream = s.get();
    slot.owned = std::move(s);
    slot.accepted_ms = steady_now_ms();
    active.fetch_add(1);
    try {
      slot.thread = std::thread([this, p = &slot] { session_thread(p); });
    } catch (const std::exception&) {  // no thread: drop the connection
      active.fetch_sub(1);
      slots.pop_back();
    }
  }
}

// The TLS handshake, inside the connection's handshake deadline. A client
// that speaks plain weft to a TLS worker is told so in a plain ERROR.
bool Worker::Impl::start_tls(Slot* slot) {
  Stream& tcp = *slot->owned;
  const auto deadline = std::chrono::steady_clock::time_point(std::chrono::milliseconds(slot->accepted_ms)) +
                        options.limits.handshake_timeout;
  try {
    if (!looks_like_tls(tcp, deadline)) {
      const Writer w = encoded(ErrorReply{ErrorKind::unsupported,
                                          "this worker requires TLS: connect to tls://HOST:PORT (docs/security.md)"});
      uint8_t header[kFrameHeaderBytes];
      encode_header(FrameHeader{static_cast<uint32_t>(w.data().size()), static_cast<uint16_t>(Cmd::error), 0}, header);
      tcp.set_write_deadline(deadline);
      tcp.write_all(header, sizeof header, w.data().data(), w.data().size());
      shared.log_line(tcp.peer(), "refused: a plain connection to a TLS worker");
      return false;
    }
    std::unique_ptr<Stream> tls_stream = tls_accept(tcp, *tls, deadline);
    std::lock_guard lock(mutex);
    if (slot->evicted) return false;
    slot->tls = std::move(tls_stream);
    slot->stream = slot->tls.get();
    return true;
  } catch (const Error& e) {
    shared.log_line(tcp.peer(), std::string("refused: ") + e.what());
    return false;
  }
}

void Worker::Impl::session_thread(Slot* slot) {
  if (!tls || start_tls(slot)) {
    Session session(shared, *slot->stream, &slot->status);
    session.run();
  }  // everything the session owned is freed here
  active.fetch_sub(1);
  std::unique_ptr<Stream> closing, closing_tls;
  {
    std::lock_guard lock(mutex);
    closing_tls = std::move(slot->tls);
    closing = std::move(slot->owned);
    slot->stream = nullptr;
    slot->done = true;
  }
  closing_tls.reset();  // before the socket under it
  closing.reset();      // the peer sees the connection close
  changed.notify_all();
}

void Worker::Impl::join_finished() {
  std::list<Slot> finished;
  {
    std::lock_guard lock(mutex);
    for (auto it = slots.begin(); it != slots.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), slots, it);
      it = next;
    }
  }
  for (Slot& s : finished) {
    if (s.thread.joinable()) s.thread.join();
  }
}

void Worker::stop() {
  Impl& w = *impl_;
  {
    std::lock_guard lock(w.mutex);
    w.stopping = true;
  }
  w.shared.stopping.store(true);
  w.advertiser.reset();    // no beacon for a worker that is going
  w.changed.notify_all();  // the monitor
  if (w.listener) w.listener->close();
  if (w.accept_thread.joinable()) w.accept_thread.join();
  if (w.monitor_thread.joinable()) w.monitor_thread.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(w.mutex);
    for (Impl::Slot& s : w.slots) {
      if (s.stream != nullptr) s.stream->shutdown();  // wakes the session's read; it ends and frees
      if (s.thread.joinable()) threads.push_back(std::move(s.thread));
    }
  }
  for (std::thread& t : threads) t.join();
  std::unique_lock lock(w.mutex);
  w.changed.wait(lock, [&] { return w.serving == 0; });
  w.slots.clear();
}

uint16_t Worker::port() const {
  return impl_->listener ? impl_->listener->port() : impl_->options.port;
}

int Worker::active_sessions() const {
  return impl_->active.load();
}

size_t Worker::memory_in_use() const {
  return impl_->shared.memory_in_use.load();
}

std::string Worker::dial_policy() const {
  return impl_->shared.dial_policy.describe();
}

std::string Worker::tls_fingerprint() const {
  return impl_->tls ? impl_->tls->fingerprint() : "";
}

void WorkerTestAccess::refuse_ops(Worker& worker, const std::vector<Op>& ops) {
  static_assert(kOpCount <= 64, "WorkerShared::refused_ops is a 64-bit mask");
  for (Op op : ops) {
    const auto bit = static_cast<unsigned>(op);
    if (bit < static_cast<unsigned>(kOpCount)) worker.impl_->shared.refused_ops |= uint64_t{1} << bit;  // others name no op
  }
}

void WorkerTestAccess::serve(Worker& worker, Stream& stream) {
  Worker::Impl& w = *worker.impl_;
  std::list<Worker::Impl::Slot>::iterator it;
  {
    std::lock_guard lock(w.mutex);
    if (w.stopping) {
      try {
        stream.shutdown();
      } catch (...) {
      }
      return;
    }
    it = w.slots.emplace(w.slots.end());
    it->stream = &stream;
    it->accepted_ms = steady_now_ms();
    ++w.serving;
  }
  w.active.fetch_add(1);
  try {
    Session session(w.shared, stream, &it->status);
    session.run();
  } catch (...) {
  }
  w.active.fetch_sub(1);
  {
    std::lock_guard lock(w.mutex);
    w.slots.erase(it);
    --w.serving;
  }
  w.changed.notify_all();
}

int WorkerTestAccess::busy_sessions(Worker& worker) {
  Worker::Impl& w = *worker.impl_;
  std::lock_guard lock(w.mutex);
  int busy = 0;
  for (const Worker::Impl::Slot& s : w.slots) busy += s.status.computing.load() ? 1 : 0;
  return busy;
}

bool make_self_signed_certificate(const std::filesystem::path& cert, const std::filesystem::path& key) {
  return TlsServer::make_self_signed(cert, key);
}

}  // namespace weft::rpc
