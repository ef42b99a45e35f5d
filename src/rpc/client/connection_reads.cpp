// Reads started ahead (Connection::start_get_tensor): a GET_TENSOR queued
// right after the work that makes what it reads, its reply taken later, so
// that the reply is on its way while this host does its own work instead
// of being asked for afterwards (a round trip). The worker answers every
// command in order, so a started read's reply comes before the reply of
// anything asked after it: read_reply_header takes the started replies off
// the stream first (take_started_replies) and keeps them here.
#include <cstring>
#include <string>
#include <utility>

#include "connection.h"

namespace weft::rpc {

uint64_t Connection::start_get_tensor(uint64_t handle, uint64_t offset, size_t size) {
  if (size == 0 || size > kMaxPayload) return 0;
  const Writer w = encoded(GetTensorRequest{handle, offset, size});
  std::lock_guard lock(mu_);
  if (broken_.load()) return 0;
  const uint64_t ticket = next_read_ticket_++;
  queue_frame(Cmd::get_tensor, w.data().data(), w.data().size(), nullptr, 0);
  in_flight_.push_back({ticket, size, false});
  return ticket;
}

void Connection::take_started_replies() {
  if (taking_started_) return;
  taking_started_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{taking_started_};
  while (!in_flight_.empty()) {
    const StartedRead r = in_flight_.front();
    std::vector<uint8_t> bytes;
    try {
      const uint32_t length = read_reply_header(Cmd::get_tensor, kMaxPayload);
      if (length != r.size)
        fail_broken(Cmd::get_tensor,
                    "malformed reply: " + std::to_string(length) + " bytes, want " + std::to_string(r.size));
      bytes.resize(length);
      read_payload(Cmd::get_tensor, bytes.data(), bytes.size());
    } catch (const Error& e) {
      in_flight_.pop_front();
      if (broken_.load()) {  // nothing after it will come: every started read fails so
        in_flight_.clear();
        throw;
      }
      if (!r.dropped) refused_.emplace(r.ticket, e);  // the worker refused this read; the session stays
      continue;
    }
    in_flight_.pop_front();
    ++round_trips_;
    if (!r.dropped) arrived_.emplace(r.ticket, std::move(bytes));
  }
}

void Connection::finish_get_tensor(uint64_t ticket, void* out) {
  flush_all_waiting();  // the request may still wait in a queue: out now (call_impl says why)
  std::lock_guard lock(mu_);
  if (arrived_.count(ticket) == 0 && refused_.count(ticket) == 0) {
    check_usable(Cmd::get_tensor);
    take_started_replies();
  }
  if (auto it = arrived_.find(ticket); it != arrived_.end()) {
    std::memcpy(out, it->second.data(), it->second.size());
    arrived_.erase(it);
    return;
  }
  if (auto it = refused_.find(ticket); it != refused_.end()) {
    const Error e = it->second;
    refused_.erase(it);
    throw e;
  }
  check_usable(Cmd::get_tensor);  // broken since it was started
  fail(ErrorKind::internal, "rpc", endpoint_ + " GET_TENSOR: no read started with ticket " + std::to_string(ticket));
}

void Connection::drop_get_tensor(uint64_t ticket) noexcept {
  std::lock_guard lock(mu_);
  arrived_.erase(ticket);
  refused_.erase(ticket);
  for (StartedRead& r : in_flight_)
    if (r.ticket == ticket) r.dropped = true;
}

}  // namespace weft::rpc
