// Remote devices and the public entry points of weft/rpc/client.h.
#include <string>

#include "client/remote.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"

namespace weft {
namespace rpc {

RemoteDevice::RemoteDevice(std::string endpoint, uint32_t index, const RemoteDeviceInfo& info,
                           const RpcOptions& options)
    : endpoint_(std::move(endpoint)),
      index_(index),
      info_(info),
      options_(options),
      buffer_type_(*this, "RPC[" + endpoint_ + "/" + std::to_string(index) + "] " + info.buffer_type_name,
                   static_cast<size_t>(info.alignment), static_cast<size_t>(info.max_size)) {}

std::string RemoteDevice::name() const {
  return "RPC[" + endpoint_ + "/" + std::to_string(index_) + "]";
}

std::string RemoteDevice::description() const {
  return info_.name + " on worker " + endpoint_ + " (" + info_.description + ")";
}

MemoryInfo RemoteDevice::memory() const {
  try {
    const std::vector<RemoteDeviceInfo> devices = connect()->get_devices();
    if (index_ < devices.size()) return MemoryInfo{devices[index_].free, devices[index_].total};
  } catch (const Error&) {
    // The worker is gone or busy refusing us: what it said last.
  }
  return MemoryInfo{info_.free, info_.total};
}

bool RemoteDevice::supports_buffer_type(const BufferType& bt) const {
  const auto* remote = dynamic_cast<const RemoteBufferType*>(&bt);
  return remote != nullptr && remote->remote_device().endpoint() == endpoint_ &&
         remote->remote_device().index() == index_;
}

std::unique_ptr<Backend> RemoteDevice::create_backend(const BackendOptions& options) {
  (void)options;
  return std::make_unique<RemoteBackend>(*this, connect());
}

std::unique_ptr<Event> RemoteDevice::create_event() {
  std::shared_ptr<Connection> connection = connect();
  if (!connection->has(kCapEvents)) return nullptr;
  const uint64_t id = connection->acquire_event_id();
  if (id == 0) return nullptr;
  return std::make_unique<RemoteEvent>(*this, std::move(connection), id);
}

}  // namespace rpc

std::vector<std::unique_ptr<Device>> make_rpc_devices(const std::string& endpoint, const RpcOptions& options) {
  rpc::parse_endpoint(endpoint);  // a malformed endpoint is invalid_input before any connection
  // A connection only for the question: devices keep the endpoint, not it.
  const std::vector<rpc::RemoteDeviceInfo> infos = rpc::get_connection(endpoint, options)->get_devices();
  std::vector<std::unique_ptr<Device>> devices;
  for (size_t i = 0; i < infos.size(); ++i) {
    devices.push_back(std::make_unique<rpc::RemoteDevice>(endpoint, static_cast<uint32_t>(i), infos[i], options));
  }
  return devices;
}

int rpc_open_connections() {
  return rpc::Connection::open_count();
}

RpcStats rpc_stats(const std::string& endpoint) {
  std::shared_ptr<rpc::Connection> connection = rpc::find_connection(endpoint);
  return connection ? connection->stats() : RpcStats{};
}

bool rpc_alive(const std::string& endpoint) {
  std::shared_ptr<rpc::Connection> connection = rpc::find_connection(endpoint);
  // A wait given up because another worker hung: this one sent heartbeats
  // to the end, and a new connection reaches it.
  if (connection && connection->abandoned()) return true;
  // An ERROR that answers the PING is an error the worker deferred from an
  // earlier command (a peer link's failure, say): the worker is there, and
  // the next PING is answered after it. Only a broken connection is a loss.
  for (int attempt = 0; attempt < 3 && connection && !connection->broken(); ++attempt) {
    try {
      connection->call(rpc::PingRequest{});
      return true;
    } catch (const Error&) {
    }
  }
  return connection && (!connection->broken() || connection->abandoned());
}

std::optional<WorkerCompute> rpc_compute_stats(const std::string& endpoint, uint32_t device) {
  std::shared_ptr<rpc::Connection> connection = rpc::find_connection(endpoint);
  if (!connection || connection->broken() || connection->peer_minor() < 6) return std::nullopt;
  try {
    const rpc::ComputeStatsReply r = connection->call(rpc::ComputeStatsRequest{device});
    return WorkerCompute{r.graphs, static_cast<double>(r.compute_ns) * 1e-9};
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace weft
