// RejoinWatch: lost workers probed in the background (weft/runtime/rejoin.h).
#include <algorithm>

#include "weft/core/error.h"
#include "weft/runtime/rejoin.h"

namespace weft {

using Clock = std::chrono::steady_clock;

namespace {

// A probe's handshake waits at most 1 s per read, not the connect timeout
// (5 s): a worker that accepts but does not answer (a stopped process: the
// kernel still completes the TCP handshake) would otherwise hold the probe,
// and so the watch's destructor at the end of a run, that long. The probe's
// connection is dropped at once; the Session connects again with its own
// options to use a worker that answered.
RpcOptions probe_options(RpcOptions options) {
  options.detect_hangs = false;
  options.reply_timeout = std::chrono::milliseconds(1000);
  return options;
}

}  // namespace

RejoinWatch::RejoinWatch(RpcOptions options, std::chrono::milliseconds min_backoff,
                         std::chrono::milliseconds max_backoff)
    : options_(probe_options(std::move(options))),
      min_backoff_(min_backoff),
      max_backoff_(std::max(min_backoff, max_backoff)) {
  thread_ = std::thread([this] { run(); });
}

RejoinWatch::~RejoinWatch() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void RejoinWatch::watch(const std::string& endpoint) {
  {
    std::lock_guard lock(mu_);
    targets_[endpoint] = Target{.next = Clock::now(), .backoff = min_backoff_, .answered = false};
  }
  wake_.notify_all();
}

void RejoinWatch::forget(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  targets_.erase(endpoint);
}

bool RejoinWatch::answered(const std::string& endpoint) const {
  std::lock_guard lock(mu_);
  const auto it = targets_.find(endpoint);
  return it != targets_.end() && it->second.answered;
}

uint64_t RejoinWatch::probes() const {
  std::lock_guard lock(mu_);
  return probes_;
}

void RejoinWatch::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // The endpoint due first, if any is due; else sleep until one is.
    std::string due;
    Clock::time_point wake_at = Clock::time_point::max();
    for (const auto& [endpoint, t] : targets_) {
      if (t.answered) continue;
      if (t.next <= Clock::now()) {
        due = endpoint;
        break;
      }
      wake_at = std::min(wake_at, t.next);
    }
    if (due.empty()) {
      if (wake_at == Clock::time_point::max())
        wake_.wait(lock);
      else
        wake_.wait_until(lock, wake_at);
      continue;
    }
    ++probes_;
    lock.unlock();
    bool ok = false;
    try {  // a handshake, on a connection dropped at once: the Session connects again to use it
      ok = !make_rpc_devices(due, options_).empty();
    } catch (const std::exception&) {
      ok = false;  // refused, unreachable, or it did not finish its HELLO: try later
    }
    lock.lock();
    const auto it = targets_.find(due);
    if (it == targets_.end()) continue;  // forgotten while probed
    Target& t = it->second;
    if (ok) {
      t.answered = true;
      continue;
    }
    t.next = Clock::now() + t.backoff;
    t.backoff = std::min(max_backoff_, t.backoff * 2);
  }
}

}  // namespace weft
