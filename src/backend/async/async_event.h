// Events of the async device: a record is a marker in one stream, reached
// when that stream's worker gets to it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "weft/backend/backend.h"

namespace weft::async {

using Clock = std::chrono::steady_clock;

// The state of one event, shared (that is the point of the shared_ptr)
// between the Event object and the queued tasks that record or wait on it,
// so a task may outlive the Event. Thread-safe.
//
// Each record gets a ticket (1, 2, ...). A ticket is reached when the stream
// that recorded it gets to it; a wait targets the latest ticket handed out
// before the wait was issued (as cudaStreamWaitEvent captures the event).
class EventState {
 public:
  // A new record: returns its ticket, pending until reach(ticket).
  uint64_t new_record();
  // The ticket a wait issued now has to see reached; 0 when never recorded.
  uint64_t latest() const;
  // Called by the recording stream when it gets to ticket; wakes waiters.
  void reach(uint64_t ticket);
  // Blocks until ticket is reached (returns at once for 0).
  void wait(uint64_t ticket);
  // When the latest record was reached; nullopt if pending or never recorded.
  std::optional<Clock::time_point> latest_time() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable reached_cv_;
  uint64_t recorded_ = 0;         // tickets handed out
  std::set<uint64_t> pending_;    // handed out, not reached yet
  uint64_t last_reached_ = 0;     // highest ticket reached ...
  Clock::time_point reached_at_;  // ... and when
};

class AsyncEvent final : public Event {
 public:
  // device must outlive the event (it is the async device that made it).
  explicit AsyncEvent(Device& device) : device_(device), state_(std::make_shared<EventState>()) {}
  AsyncEvent(const AsyncEvent&) = delete;
  AsyncEvent& operator=(const AsyncEvent&) = delete;

  Device& device() override { return device_; }
  // Blocks until the latest record made before this call is reached.
  void synchronize() override { state_->wait(state_->latest()); }

  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  Device& device_;
  std::shared_ptr<EventState> state_;
};

}  // namespace weft::async
