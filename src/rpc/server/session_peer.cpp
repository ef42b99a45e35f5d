// Peer links (docs/rpc-protocol.md section 8): a host's session hands out a
// ticket (PEER_TICKET) and waits for pushes (PEER_WAIT); a session opens
// links to other workers (PEER_CONNECT) and pushes its bytes over them
// (PUSH_TO_PEER); a link's own session on the receiving worker only posts
// what arrives (PEER_ATTACH, then PEER_PUSH) to the inbox its ticket names.
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>

#include "client/connection.h"
#include "server/session.h"

namespace weft::rpc {
namespace {

// The inbox holds at most this much waiting for PEER_WAIT (and never more
// than the session's own memory limit).
constexpr size_t kInboxBytes = size_t{256} << 20;

}  // namespace

void Session::on_peer_ticket() {
  parse<PeerTicketRequest>(payload_);
  if (!inbox_) {
    if (RAND_bytes(ticket_.data(), static_cast<int>(ticket_.size())) != 1) {
      fail(ErrorKind::internal, "PEER_TICKET", "cannot draw a random ticket");
    }
    inbox_ = std::make_shared<PeerInbox>(shared_, std::min(kInboxBytes, shared_.limits.session_memory));
    shared_.peers.add(ticket_, inbox_);
  }
  if (answer_deferred()) return;
  reply(PeerTicketReply{ticket_});
}

void Session::on_peer_connect() {
  PeerConnectRequest req = parse<PeerConnectRequest>(payload_);
  if (links_.count(req.link) != 0) {
    fail(ErrorKind::invalid_input, "PEER_CONNECT", "link " + std::to_string(req.link) + " is already open");
  }
  // Every dial counts, made or not: a session cannot probe endlessly.
  if (dials_ >= kMaxPeerLinksPerSession) {
    fail(ErrorKind::invalid_input, "PEER_CONNECT",
         "link " + std::to_string(req.link) + " would be dial " + std::to_string(dials_ + 1) + " of this session (at most " +
             std::to_string(kMaxPeerLinksPerSession) + ", failed ones included)");
  }
  const Endpoint target = parse_endpoint(req.endpoint);  // a malformed endpoint is the host's error (invalid_input)
  ++dials_;
  const std::string what = "[PEER_CONNECT] peer link " + std::to_string(req.link) + " to " + req.endpoint;
  // Refusals before any dial: the session stays, the host hears why.
  if (!shared_.dial_rate.try_take()) {
    send_error(ErrorKind::out_of_memory, what + ": this worker dials at most " +
                                             std::to_string(static_cast<int>(DialRate::kPerSecond)) +
                                             " peer links a second; try again later");
    return;
  }
  if (target.tls && target.pin.empty()) {  // a worker trusts no certificate on first use
    send_error(ErrorKind::unsupported, what + ": refused: a TLS link needs the worker's fingerprint (tls://HOST:PORT#sha256:HEX)");
    return;
  }
  std::string why;
  const std::optional<std::string> address = shared_.dial_policy.choose(req.endpoint, shared_.listen_port, &why);
  if (!address) {
    send_error(ErrorKind::unsupported, what + ": refused: " + why);
    return;
  }
  // The checked address is the one dialed; over TLS, pinned to the host's fingerprint.
  const std::string dial = target.tls ? "tls://" + *address + "#" + target.pin : *address;
  // The link authenticates with this worker's own secret: workers of one
  // host share it. Its keepalive keeps the other worker's idle timeout away.
  RpcOptions options;
  options.auth_secret = shared_.auth_secret;
  options.reply_timeout = shared_.limits.io_timeout;
  options.detect_hangs = false;  // a link only pushes: its own io_timeout bounds it, as before 1.10
  options.keepalive = std::max(std::chrono::milliseconds(1000), shared_.limits.idle_timeout / 2);
  options.hash_threads = 1;
  options.trust_on_first_use = false;
  std::shared_ptr<Connection> connection;
  try {
    connection = std::make_shared<Connection>(dial, options, /*counted=*/false);
    if (!connection->has(kCapPeerLinks)) {
      fail(ErrorKind::unsupported, "rpc", "that worker does not take peer links (it speaks protocol 1." +
                                              std::to_string(connection->peer_minor()) + ")");
    }
    connection->call(PeerAttachRequest{req.ticket, req.source, req.label});
  } catch (const Error& e) {
    // What answered (nothing, a closed port, another service, a weft
    // worker that refused) stays in this worker's log: the host hears one
    // text for all, so a worker cannot be used to map a network. Answered
    // here: the loop takes a thrown disconnected error for the host's own socket.
    shared_.log_line(peer_, what + " (" + dial + ") failed: " + e.what());
    send_error(ErrorKind::disconnected,
               what + ": no weft worker took the link (this worker's log has the reason)");
    return;
  }
  links_[req.link] = PeerLink{std::move(connection), req.endpoint, false};
  if (answer_deferred()) return;
  reply_empty();
}

void Session::on_peer_attach() {
  PeerAttachRequest req = parse<PeerAttachRequest>(payload_);
  if (!buffers_.empty() || !graphs_.empty() || inbox_ || !links_.empty()) {
    fail(ErrorKind::invalid_input, "PEER_ATTACH", "a session that holds buffers, graphs or links cannot become a peer link");
  }
  std::shared_ptr<PeerInbox> inbox = shared_.peers.find(req.ticket);
  if (!inbox) fail(ErrorKind::invalid_input, "PEER_ATTACH", "unknown ticket (no session of this worker handed it out)");
  std::string label = req.label;
  label.erase(std::remove_if(label.begin(), label.end(), [](char c) { return c < 0x20 || c == 0x7f; }), label.end());
  if (label.size() > 200) label.resize(200);
  label = "'" + label + "' (" + peer_ + ")";
  const std::string why = inbox->attach(req.source, label);
  if (!why.empty()) fail(ErrorKind::invalid_input, "PEER_ATTACH", why);
  attached_ = std::move(inbox);
  source_ = req.source;
  state_ = State::peer;
  reply_empty();
}

void Session::on_peer_push() {
  const PeerPushRequest push = parse<PeerPushRequest>(payload_);
  const auto deadline = std::chrono::steady_clock::now() + shared_.limits.io_timeout;
  const std::string why = attached_->post(source_, push, deadline);
  // The link ends: whatever it would push next has nowhere to go.
  if (!why.empty()) fail(ErrorKind::invalid_input, "PEER_PUSH", why);
}

void Session::on_push_to_peer() {
  const PushToPeerRequest req = parse<PushToPeerRequest>(payload_);
  auto it = links_.find(req.link);
  if (it == links_.end()) {
    fail(ErrorKind::invalid_input, "PUSH_TO_PEER", "link " + std::to_string(req.link) + " was never opened (PEER_CONNECT)");
  }
  Buffer& b = live_buffer(req.src_handle);
  check_range(b, req.src_handle, req.src_offset, req.size);
  PeerLink& link = it->second;
  const std::string what = "[PUSH_TO_PEER] peer link " + std::to_string(req.link) + " to " + link.endpoint;
  if (link.broken) {
    defer(Error(ErrorKind::disconnected, what + ": broken by an earlier failure"));
    return;
  }
  sync_all();  // the bytes are those of every command before this one
  try {
    if (deferred_) {
      // This stream failed: the receiver's wait fails with our reason, and
      // our host hears it at its next reply too.
      std::string message = deferred_->what();
      if (message.size() > kMaxString) message.resize(kMaxString);  // B refuses a longer failure
      PeerPushRequest head{req.event_id, req.dst_handle, req.dst_offset, message.size(),
                           static_cast<uint8_t>(kPushLast | kPushFailed), {}};
      Writer w;
      head.encode_head(w);
      link.connection->send(Cmd::peer_push, w, message.data(), message.size());
      return;
    }
    std::vector<uint8_t> staging;
    const uint8_t* src = nullptr;
    if (b.type().is_host()) {
      src = static_cast<const uint8_t*>(b.base()) + req.src_offset;
    } else {
      staging.resize(req.size);
      read_bytes(b, req.src_offset, staging.data(), req.size);
      src = staging.data();
    }
    uint64_t done = 0;
    do {
      const uint64_t n = std::min<uint64_t>(req.size - done, kMaxPushBytes);
      const uint8_t flags = done + n == req.size ? kPushLast : 0;
      PeerPushRequest head{req.event_id, req.dst_handle, req.dst_offset + done, n, flags, {}};
      Writer w;
      head.encode_head(w);
      link.connection->send(Cmd::peer_push, w, src + done, n);
      done += n;
    } while (done < req.size);
  } catch (const Error& e) {
    link.broken = true;
    defer(Error(ErrorKind::disconnected, what + ": " + e.what()));
  }
}

void Session::on_peer_wait() {
  const auto [source, event] = parse<PeerWaitRequest>(payload_);
  if (!inbox_) fail(ErrorKind::invalid_input, "PEER_WAIT", "no ticket was handed out (PEER_TICKET first)");
  std::vector<PeerInbox::Part> parts;
  status_.computing.store(true);  // the monitor cancels the wait if the host goes
  try {
    parts = inbox_->take(source, event, std::chrono::steady_clock::now() + shared_.limits.idle_timeout, status_.cancel);
  } catch (...) {
    status_.computing.store(false);
    defer_current_exception();  // the host hears it at its next reply
    return;
  }
  status_.computing.store(false);
  sync_all();  // a running graph may still read the bytes these overwrite
  for (const PeerInbox::Part& p : parts) {
    auto it = buffers_.find(p.handle);
    const uint64_t size = p.bytes.size();
    if (it == buffers_.end() || p.offset > it->second.buffer->size() || size > it->second.buffer->size() - p.offset) {
      // The pusher named memory this session does not have: nothing is
      // written, and the host is told (the link's fault, not the host's).
      defer(Error(ErrorKind::internal, "[PEER_WAIT] a push of event " + std::to_string(event) + " from source " +
                                           std::to_string(source) + " names bytes [" + std::to_string(p.offset) +
                                           ", +" + std::to_string(size) + ") of buffer " + std::to_string(p.handle) +
                                           ", which is not memory of this session: refused"));
      return;
    }
  }
  for (const PeerInbox::Part& p : parts) write_bytes(*buffers_.at(p.handle).buffer, p.offset, p.bytes.data(), p.bytes.size());
}

void Session::end_peer_links(const std::string& why) noexcept {
  try {
    if (attached_) attached_->detach(source_, why);
    attached_.reset();
    if (inbox_) {
      shared_.peers.remove(ticket_);
      inbox_->close();
      inbox_.reset();
    }
    links_.clear();  // each link's connection closes; the other worker's link session ends
  } catch (...) {
  }
}

}  // namespace weft::rpc
