// The worker's HEARTBEAT sender (heartbeat.h).
#include "server/heartbeat.h"

#include "protocol/wire.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kEveryNs = int64_t{kHeartbeatEveryMs} * 1000000;

}  // namespace

Heartbeat::Heartbeat(Stream& stream, std::chrono::milliseconds write_timeout)
    : stream_(stream), write_timeout_(write_timeout), last_write_ns_(now_ns()) {
  thread_ = std::thread([this] { loop(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeat::wrote() {
  last_write_ns_.store(now_ns(), std::memory_order_relaxed);
}

void Heartbeat::loop() {
  // Checks twice per period: a heartbeat is late by at most half a period.
  const auto check_every = std::chrono::milliseconds(kHeartbeatEveryMs / 2);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, check_every);
    if (stopping_) return;
    if (!busy_.load(std::memory_order_relaxed)) continue;
    if (now_ns() - last_write_ns_.load(std::memory_order_relaxed) < kEveryNs) continue;
    lock.unlock();
    bool ok = true;
    {
      std::lock_guard writes(write_mu_);
      // Re-checked under the write lock: a reply may just have gone out.
      if (now_ns() - last_write_ns_.load(std::memory_order_relaxed) >= kEveryNs) {
        uint8_t raw[kFrameHeaderBytes];
        encode_header(FrameHeader{0, kHeartbeatFrame, 0}, raw);
        try {
          stream_.set_write_deadline(std::chrono::steady_clock::now() + write_timeout_);
          stream_.write_all(raw, sizeof raw);
          wrote();
          sent_.fetch_add(1);
        } catch (const Error&) {
          ok = false;  // the session finds the broken stream itself
        }
      }
    }
    lock.lock();
    if (!ok) return;
  }
}

}  // namespace weft::rpc
