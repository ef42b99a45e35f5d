// Remote backends (one in-order stream of a worker's device) and events.
#include <initializer_list>
#include <string>

#include "client/remote.h"
#include "protocol/graph_codec.h"
#include "weft/core/error.h"

namespace weft::rpc {

RemoteBackend::RemoteBackend(RemoteDevice& device, std::shared_ptr<Connection> connection)
    : device_(device), connection_(std::move(connection)), index_(device.index()) {}

std::string RemoteBackend::name() const {
  return device_.name();
}

Device& RemoteBackend::device() {
  return device_;
}

RemoteBuffer* RemoteBackend::own_buffer(const Tensor& t) const {
  auto* b = dynamic_cast<RemoteBuffer*>(t.buffer);
  return b != nullptr && b->connection() == connection_ ? b : nullptr;
}

RemoteEvent* RemoteBackend::own_event(Event& e) const {
  auto* re = dynamic_cast<RemoteEvent*>(&e);
  return re != nullptr && re->connection() == connection_ ? re : nullptr;
}

void RemoteBackend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  RemoteBuffer* b = own_buffer(t);
  if (b == nullptr) {
    Backend::set_tensor_async(t, data, offset, size);
    return;
  }
  if (offset > t.nbytes() || size > t.nbytes() - offset) {
    fail(ErrorKind::invalid_input, "rpc set_tensor_async",
         "bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + ") are outside " + shape_string(t) + " '" +
             t.name + "'");
  }
  // Pipelined, without the cache's round trip: the bytes are written to the
  // socket, or copied to go with the next frame (a split's inputs go with
  // its GRAPH_COMPUTE), before this returns, so the caller's memory is free
  // at once.
  b->upload(b->range_of(t, offset, size, "rpc set_tensor_async"), data, size, /*try_cache=*/false, /*later=*/true);
}

bool RemoteBackend::copy_tensor_async(Backend& src_backend, const Tensor& src, Tensor& dst) {
  (void)src_backend;
  RemoteBuffer* to = own_buffer(dst);
  // The worker runs this session's commands in order, so the copy is in
  // this stream's order; the caller made sure src is ready.
  return to != nullptr && to->copy_tensor(src, dst);
}

const RemoteBackend* RemoteBackend::peer_of(const Backend& src_backend) const {
  const auto* other = dynamic_cast<const RemoteBackend*>(&src_backend);
  if (other == nullptr || other->connection_ == connection_) return nullptr;
  if (!connection_->has(kCapPeerLinks) || !other->connection_->has(kCapPeerLinks)) return nullptr;
  return other;
}

bool RemoteBackend::copies_ordered_from(const Backend& src_backend) const {
  return peer_of(src_backend) != nullptr;
}

bool RemoteBackend::copy_tensor_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) {
  const uint64_t ticket = push_ordered(src_backend, src, dst);
  if (ticket == 0) return false;
  wait_pushed(src_backend, ticket);
  return true;
}

uint64_t RemoteBackend::push_ordered(Backend& src_backend, const Tensor& src, Tensor& dst) {
  const RemoteBackend* from = peer_of(src_backend);
  RemoteBuffer* to = own_buffer(dst);
  auto* src_buffer = dynamic_cast<RemoteBuffer*>(src.buffer);
  // Bytes go as they are: both packed alike (a copy's layout is its source's).
  // Larger copies than one push go through the host: the receiver holds a
  // whole event before it writes it, in an inbox of bounded size.
  if (from == nullptr || to == nullptr || src_buffer == nullptr || src_buffer->connection() != from->connection_ ||
      src.type != dst.type || !same_shape(src, dst) || !src.is_contiguous() || !dst.is_contiguous() ||
      src.nbytes() > kMaxPushBytes) {
    return 0;
  }
  Connection& source = *from->connection_;
  const Connection::PeerRoute route = source.peer_route(*connection_);
  if (route.link == 0) return 0;  // these two cannot link: through the host
  const uint64_t event = connection_->next_peer_event();
  PushToPeerRequest push;
  push.link = route.link;
  push.src_handle = src_buffer->handle();
  push.src_offset = src_buffer->offset_of(src);
  push.size = src.nbytes();
  push.dst_handle = to->handle();
  push.dst_offset = to->offset_of(dst);
  push.event_id = event;
  // It waits for the submission's flush (or the host's next blocking call):
  // a token's frames go to each worker in one write.
  source.send_later(push);
  return event;
}

void RemoteBackend::wait_pushed(Backend& src_backend, uint64_t ticket) {
  const RemoteBackend* from = peer_of(src_backend);
  if (from == nullptr || ticket == 0)
    fail(ErrorKind::invalid_input, "rpc", "wait_pushed without a push from that backend");
  // The route exists: push_ordered made (or found) it.
  connection_->send_later(PeerWaitRequest{from->connection_->peer_route(*connection_).source, ticket});
}

void RemoteBackend::compute(const Graph& g) {
  // What the worker would refuse by ending the session is refused here.
  for (const Tensor* node : g.nodes()) {
    if (!connection_->knows_node(*node)) {
      const uint16_t needed = minor_needed(*node);
      if (needed == kNoMinor)
        fail(ErrorKind::unsupported, "rpc compute",
             "tensor '" + node->name + "' (" + op_name(node->op) + ") has a source the RPC protocol does not carry: " +
                 "it runs on local devices only");
      fail(ErrorKind::unsupported, "rpc compute",
           "tensor '" + node->name + "' (" + op_name(node->op) + ") is a node worker " + connection_->endpoint() +
               " does not know (it speaks protocol 1." + std::to_string(connection_->peer_minor()) + ", this needs 1." +
               std::to_string(needed) + "): upgrade the worker");
    }
    for (const Tensor* t : std::initializer_list<const Tensor*>{node, node->src[0], node->src[1], node->src[2],
                                                                node->src[3], node->view_src}) {
      if (t == nullptr) continue;
      const std::string why = remote_unsendable(*t);
      if (!why.empty()) {
        fail(ErrorKind::unsupported, "rpc compute",
             "tensor '" + t->name + "' " + shape_string(*t) + " (" + op_name(t->op) + ") " + why +
                 ": the protocol cannot send it");
      }
    }
  }
  Writer& w = graph_bytes_;
  w.data().clear();
  encode_graph(w, g, [&](const Tensor& t) -> RemoteLocation {
    RemoteBuffer* b = own_buffer(t);
    if (b == nullptr) {
      const std::string where = t.buffer == nullptr ? "has no buffer"
                                : dynamic_cast<RemoteBuffer*>(t.buffer) != nullptr
                                    ? "is in a buffer of another worker connection"
                                    : "is in a " + t.buffer->type().name() + " buffer";
      fail(ErrorKind::invalid_input, "rpc compute",
           "tensor '" + t.name + "' " + shape_string(t) + " (" + op_name(t.op) + ") " + where + ", not on worker " +
               connection_->endpoint());
    }
    return RemoteLocation{b->handle(), b->offset_of(t)};
  });
  connection_->graph_compute(index_, w.data());
}

void RemoteBackend::flush() {
  connection_->flush();
}

void RemoteBackend::synchronize() {
  connection_->call(SynchronizeRequest{index_});
}

void RemoteBackend::record_event(Event& e) {
  RemoteEvent* re = own_event(e);
  if (re == nullptr) {
    Backend::record_event(e);  // not ours: synchronize, which is always correct
    return;
  }
  connection_->send_later(EventRecordRequest{index_, re->id()});  // goes with the next frame; EVENT_SYNC is one
  re->mark_recorded();
}

void RemoteBackend::wait_event(Event& e) {
  RemoteEvent* re = own_event(e);
  if (re == nullptr) {
    e.synchronize();
    return;
  }
  if (!re->recorded()) return;  // never recorded: counts as done
  connection_->send_later(EventWaitRequest{index_, re->id()});  // goes with the compute it orders
}

RemoteEvent::~RemoteEvent() {
  try {
    connection_->release_event_id(id_);
  } catch (...) {
    // Only an allocation can fail here; the id is then simply not reused.
  }
}

Device& RemoteEvent::device() {
  return device_;
}

void RemoteEvent::synchronize() {
  if (!recorded()) return;
  connection_->call(EventSyncRequest{id_});
}

}  // namespace weft::rpc
