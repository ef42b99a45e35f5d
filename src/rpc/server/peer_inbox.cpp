// PeerInbox and PeerRegistry (peer_inbox.h).
#include "server/peer_inbox.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "server/session.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

// How often a waiting owner looks at its cancel flag and the worker's stop.
constexpr std::chrono::milliseconds kPollEvery{20};

}  // namespace

PeerInbox::PeerInbox(WorkerShared& shared, size_t cap_bytes) : shared_(shared), cap_bytes_(cap_bytes) {}

PeerInbox::~PeerInbox() {
  shared_.release(bytes_);
}

std::string PeerInbox::attach(uint32_t source, const std::string& label) {
  std::lock_guard lock(mu_);
  if (closed_) return "the session this ticket named has ended";
  auto it = sources_.find(source);
  if (it != sources_.end()) return "source " + std::to_string(source) + " is already attached (" + it->second.label + ")";
  if (sources_.size() >= kMaxPeerSources) {
    return "the session already has " + std::to_string(kMaxPeerSources) + " peer links attached";
  }
  Source& s = sources_[source];
  s.label = label;
  s.attached = true;
  changed_.notify_all();
  return "";
}

std::string PeerInbox::post(uint32_t source, const PeerPushRequest& push,
                            std::chrono::steady_clock::time_point deadline) {
  const bool failed = (push.flags & kPushFailed) != 0;
  const bool last = (push.flags & kPushLast) != 0 || failed;
  // A failure carries the pusher's message: text, held to the protocol's
  // string limit like every other message (decode refuses more already).
  if (failed && push.data.size() > kMaxString) {
    return "a failed push's message of " + std::to_string(push.data.size()) + " bytes is over the " +
           std::to_string(kMaxString) + "-byte string limit";
  }
  // A sender splits an event only at kMaxPushBytes: an empty part is the
  // whole (empty) event, never one of several.
  if (push.data.empty() && !last) return "an empty part that is not its event's last";
  // Copied before anything is counted: an allocation failure leaves no trace.
  Part part{push.dst_handle, push.dst_offset, std::vector<uint8_t>(push.data.begin(), push.data.end())};
  std::unique_lock lock(mu_);
  // Every byte the push makes the worker keep is charged: its data (or its
  // message), its part's bookkeeping, and a new event's.
  const bool new_event = [&] {
    auto s = sources_.find(source);
    return s == sources_.end() || s->second.events.count(push.event_id) == 0;
  }();
  const size_t n = part.bytes.size() + kPartOverhead + (new_event ? kEventOverhead : 0);
  for (;;) {
    if (closed_) return "the session it pushes into has ended";
    if (shared_.stopping.load()) return "the worker is stopping";
    if (n > cap_bytes_) return "a push of " + std::to_string(n) + " bytes is over the inbox's " + std::to_string(cap_bytes_);
    if (n <= cap_bytes_ - std::min(bytes_, cap_bytes_) && shared_.try_reserve(n)) break;
    // Room comes when the owner takes an event (a notify) or another session
    // frees budget (no notify: looked at again every kPollEvery).
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return "no room for " + std::to_string(n) + " bytes in time (the session has not taken what waits)";
    changed_.wait_until(lock, std::min(deadline, now + kPollEvery));
  }
  // Only this link's session posts for its source, so whether the event is
  // new cannot have changed while the lock was let go above.
  bytes_ += n;
  auto refuse = [&](std::string why) {
    bytes_ -= n;
    shared_.release(n);
    return why;
  };
  try {
    Source& s = sources_[source];
    auto it = s.events.find(push.event_id);
    if (it == s.events.end()) {
      if (s.events.size() >= kMaxEventsPerSource) {
        return refuse(std::to_string(kMaxEventsPerSource) + " events of this link are waiting already");
      }
      it = s.events.emplace(push.event_id, Pending{}).first;
    }
    Pending& p = it->second;
    if (p.complete) return refuse("event " + std::to_string(push.event_id) + " was already complete");
    if (p.parts.size() >= kMaxPartsPerEvent) {
      return refuse("event " + std::to_string(push.event_id) + " has " + std::to_string(kMaxPartsPerEvent) +
                    " parts already");
    }
    if (failed) {
      p.failure = std::string(part.bytes.begin(), part.bytes.end());
    } else {
      p.parts.push_back(std::move(part));
    }
    p.charged += n;
    if (last) {
      p.complete = true;
      changed_.notify_all();
    }
  } catch (...) {
    bytes_ -= n;
    shared_.release(n);
    throw;
  }
  return "";
}

void PeerInbox::detach(uint32_t source, const std::string& why) {
  std::lock_guard lock(mu_);
  auto it = sources_.find(source);
  if (it == sources_.end()) return;
  it->second.ended = why;
  changed_.notify_all();
}

bool PeerInbox::waiting(uint32_t source) {
  std::lock_guard lock(mu_);
  auto it = sources_.find(source);
  return it != sources_.end() && !it->second.events.empty();
}

std::vector<PeerInbox::Part> PeerInbox::take(uint32_t source, uint64_t event,
                                              std::chrono::steady_clock::time_point deadline,
                                              const std::atomic<bool>& cancel) {
  std::unique_lock lock(mu_);
  for (;;) {
    auto s = sources_.find(source);
    if (s != sources_.end()) {
      auto e = s->second.events.find(event);
      if (e != s->second.events.end() && e->second.complete) {
        Pending p = std::move(e->second);
        s->second.events.erase(e);
        bytes_ -= p.charged;
        shared_.release(p.charged);
        changed_.notify_all();  // room for posters
        if (p.failure) {
          fail(ErrorKind::disconnected, "PEER_WAIT",
               "peer " + s->second.label + " could not push event " + std::to_string(event) + ": " + *p.failure);
        }
        return std::move(p.parts);
      }
      if (s->second.ended) {
        fail(ErrorKind::disconnected, "PEER_WAIT",
             "the peer link from " + s->second.label + " ended before event " + std::to_string(event) +
                 " arrived: " + *s->second.ended);
      }
    }
    if (cancel.load() || shared_.stopping.load()) {
      fail(ErrorKind::disconnected, "PEER_WAIT", "cancelled while waiting for event " + std::to_string(event));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      fail(ErrorKind::disconnected, "PEER_WAIT",
           "event " + std::to_string(event) + " of source " + std::to_string(source) + " did not arrive in time" +
               (s == sources_.end() ? " (no peer link attached as that source)" : ""));
    }
    changed_.wait_until(lock, std::min(deadline, now + kPollEvery));
  }
}

void PeerInbox::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  changed_.notify_all();
}

void PeerRegistry::add(const Ticket& ticket, const std::shared_ptr<PeerInbox>& inbox) {
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [](const auto& e) { return e.second.expired(); });
  entries_.emplace_back(ticket, inbox);
}

void PeerRegistry::remove(const Ticket& ticket) {
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [&](const auto& e) { return CRYPTO_memcmp(e.first.data(), ticket.data(), ticket.size()) == 0; });
}

std::shared_ptr<PeerInbox> PeerRegistry::find(const Ticket& ticket) {
  std::lock_guard lock(mu_);
  std::shared_ptr<PeerInbox> found;
  for (const auto& e : entries_) {  // every entry compared, in constant time each
    if (CRYPTO_memcmp(e.first.data(), ticket.data(), ticket.size()) == 0) found = e.second.lock();
  }
  return found;
}

}  // namespace weft::rpc
