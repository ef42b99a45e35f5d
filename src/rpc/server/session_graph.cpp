// GRAPH_COMPUTE, SYNCHRONIZE and the events (docs/rpc-protocol.md sections
// 3, 4 and 7): stored graphs by id, dropped when a buffer they use is freed.
#include <algorithm>

#include "server/session.h"
#include "weft/core/graph_cost.h"

namespace weft::rpc {
namespace {

constexpr size_t kMaxDroppedGraphIds = 4096;  // remembered only for better messages
constexpr size_t kEventBytes = 64;             // an entry of events_

}  // namespace

void Session::on_graph_compute() {
  const GraphComputeRequest req = parse<GraphComputeRequest>(payload_);  // the graph: the rest of the payload
  check_device(req.device);
  StoredGraph& stored = req.has_graph ? store_graph(req) : stored_graph(req.graph_id, req.device);
  stored.last_use = ++use_clock_;
  compute_stored(stored);
}

// A graph sent with the request: decoded under the session's budget (its
// cost checked against the worker's limit, every buffer it reads readable by
// the device), then stored under its id, replacing one of that id or, at
// the cap, the least recently used.
Session::StoredGraph& Session::store_graph(const GraphComputeRequest& req) {
  const uint32_t device = req.device;
  const uint64_t graph_id = req.graph_id;
  Device& dev = *shared_.devices[device];
  Reader r(req.graph, "GRAPH_COMPUTE");
  std::vector<uint64_t> used;
  auto buffer_of = [&](uint64_t handle) -> Buffer* {
    auto it = buffers_.find(handle);
    if (it == buffers_.end()) return nullptr;
    used.push_back(handle);
    return it->second.buffer.get();
  };
  auto supports = [&](const Tensor& t) { return shared_.computes(dev, t); };
  // Charged before decoding, for the most tensors this payload can hold;
  // trimmed to the graph's real size once decoded.
  size_t charged = decoded_graph_bytes(max_graph_tensors_in(r.remaining()));
  charge(charged, "a graph of up to " + std::to_string(max_graph_tensors_in(r.remaining())) + " tensors");
  std::unique_ptr<DecodedGraph> decoded;
  try {
    decoded = decode_graph(r, buffer_of, supports);
    r.expect_end();
    const uint64_t cost = graph_cost(decoded->graph).total();
    if (cost > shared_.limits.max_graph_cost) {
      fail(ErrorKind::out_of_memory, "GRAPH_COMPUTE",
           "the graph costs " + std::to_string(cost) + " (multiply-adds + bytes touched), over the worker's limit of " +
               std::to_string(shared_.limits.max_graph_cost) + " per graph");
    }
  } catch (...) {
    refund(charged);
    throw;
  }
  const size_t actual = decoded_graph_bytes(decoded->ctx.size());
  if (actual < charged) {
    refund(charged - actual);
    charged = actual;
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (uint64_t handle : used) {
    BufferType& bt = buffers_.at(handle).buffer->type();
    if (!dev.supports_buffer_type(bt)) {
      refund(charged);
      fail(ErrorKind::invalid_input, "GRAPH_COMPUTE",
           "buffer " + std::to_string(handle) + " (" + bt.name() + ") cannot be read by device " +
               std::to_string(device) + " (" + dev.name() + ")");
    }
  }
  auto same = graphs_.find(graph_id);
  if (same != graphs_.end()) {
    erase_graph(same);
  } else if (graphs_.size() >= kMaxGraphsPerSession) {
    erase_graph(std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
      return a.second.last_use < b.second.last_use;
    }));
  }
  dropped_graphs_.erase(graph_id);
  StoredGraph* stored = &graphs_[graph_id];
  stored->graph = std::move(decoded);
  stored->device = device;
  stored->handles = std::move(used);
  stored->charged = charged;
  try {
    stored->working = backend(device).working_bytes(stored->graph->graph);  // once per graph, not per run
  } catch (...) {
    stored->working = SIZE_MAX;  // unsupported: compute() reports it
  }
  return *stored;
}

// A graph stored earlier, by id, on the device it was built for.
Session::StoredGraph& Session::stored_graph(uint64_t graph_id, uint32_t device) {
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
  return it->second;
}

// Runs a stored graph. The backend's working memory (kernel scratch) for it
// is charged first: a graph whose scratch does not fit is refused with
// out_of_memory (deferred, like any compute error) and nothing runs. While it
// runs, the worker's monitor watches the peer; if it closes, the compute
// stops at the next node boundary.
void Session::compute_stored(StoredGraph& stored) {
  const uint32_t device = stored.device;
  Backend& be = backend(device);
  try {
    const size_t need = stored.working == SIZE_MAX ? 0 : stored.working;
    if (need > scratch_charged_[device]) {
      charge(need - scratch_charged_[device], "kernel scratch for the graph");
      scratch_charged_[device] = need;
    }
  } catch (...) {
    defer_current_exception();
    return;
  }
  pending_work_[device] = true;
  be.set_cancel_flag(&status_.cancel);
  status_.computing.store(true);
  const auto start = std::chrono::steady_clock::now();
  try {
    be.compute(stored.graph->graph);
  } catch (...) {
    defer_current_exception();  // a kernel's failure is not the client's: reported by the next reply
  }
  compute_ns_[device] += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  ++graphs_run_[device];
  status_.computing.store(false);
}

void Session::erase_graph(std::unordered_map<uint64_t, StoredGraph>::iterator it) {
  sync_device(it->second.device);  // it may still be running
  const size_t charged = it->second.charged;
  graphs_.erase(it);
  refund(charged);
}

void Session::drop_graphs_using(uint64_t handle) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    const auto& hs = it->second.handles;
    if (std::binary_search(hs.begin(), hs.end(), handle)) {
      if (dropped_graphs_.size() >= kMaxDroppedGraphIds) dropped_graphs_.clear();
      dropped_graphs_[it->first] = handle;
      auto next = std::next(it);
      erase_graph(it);
      it = next;
    } else {
      ++it;
    }
  }
}

void Session::on_synchronize() {
  const uint32_t device = parse<SynchronizeRequest>(payload_).device;
  check_device(device);
  sync_device(device);
  if (answer_deferred()) return;
  reply_empty();
}

void Session::on_compute_stats() {
  const uint32_t device = parse<ComputeStatsRequest>(payload_).device;
  check_device(device);
  sync_device(device);  // the work it was given is counted whole
  if (answer_deferred()) return;
  reply(ComputeStatsReply{graphs_run_[device], compute_ns_[device]});
}

// --- events ---
// Commands run in order, so a record only remembers its device; a wait or
// sync waits for that device's stream (conservatively: all of it so far).

void Session::on_event_record() {
  const auto [device, id] = parse<EventRecordRequest>(payload_);
  check_device(device);
  if (events_.find(id) == events_.end()) {
    if (events_.size() >= kMaxEventsPerSession) {
      fail(ErrorKind::invalid_input, "EVENT_RECORD",
           "event " + std::to_string(id) + " would pass the cap of " + std::to_string(kMaxEventsPerSession) +
               " events per session");
    }
    charge(kEventBytes, "an event");  // kept until the session ends, like the event
  }
  events_[id] = device;
}

void Session::on_event_wait() {
  const auto [device, id] = parse<EventWaitRequest>(payload_);
  check_device(device);
  auto it = events_.find(id);
  if (it != events_.end() && it->second != device) sync_device(it->second);  // one stream is in order already
}

void Session::on_event_sync() {
  const uint64_t id = parse<EventSyncRequest>(payload_).event_id;
  auto it = events_.find(id);
  if (it != events_.end()) sync_device(it->second);  // never recorded: already passed
  if (answer_deferred()) return;
  reply_empty();
}

void Session::on_ping() {
  parse<PingRequest>(payload_);
  if (answer_deferred()) return;
  reply_empty();
}

}  // namespace weft::rpc
