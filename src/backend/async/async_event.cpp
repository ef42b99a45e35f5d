#include "async_event.h"

namespace weft::async {

uint64_t EventState::new_record() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t ticket = ++recorded_;
  pending_.insert(ticket);
  return ticket;
}

uint64_t EventState::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

void EventState::reach(uint64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.erase(ticket);
    if (ticket > last_reached_) {
      last_reached_ = ticket;
      reached_at_ = Clock::now();
    }
  }
  reached_cv_.notify_all();
}

void EventState::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  reached_cv_.wait(lock, [&] { return pending_.count(ticket) == 0; });
}

std::optional<Clock::time_point> EventState::latest_time() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorded_ == 0 || pending_.count(recorded_) != 0) return std::nullopt;
  return reached_at_;  // recorded_ is the highest ticket, so it is last_reached_
}

}  // namespace weft::async
