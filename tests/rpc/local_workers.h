// Workers in this process on loopback, each serving its own device (a CPU
// of one thread by default): what the split-model tests run their stages on.
//
//   LocalWorkers w(2);
//   auto devices = weft::make_rpc_devices(w.endpoint(0));
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/rpc/worker.h"

namespace weft::testing {

class LocalWorkers {
 public:
  // n workers, started; make(i) makes worker i's device; worker 0 at
  // first_port (0: any free port; the others always any).
  explicit LocalWorkers(int n, const std::function<std::unique_ptr<Device>(int)>& make = {}, uint16_t first_port = 0) {
    for (int i = 0; i < n; ++i) {
      devices_.push_back(make ? make(i) : make_cpu_device(1));
      rpc::WorkerOptions o;
      o.log = false;
      if (i == 0) o.port = first_port;
      workers_.push_back(std::make_unique<rpc::Worker>(std::vector<Device*>{devices_.back().get()}, o));
      workers_.back()->start();
    }
  }
  ~LocalWorkers() { workers_.clear(); }  // before their devices
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  std::string endpoint(int i) const { return "127.0.0.1:" + std::to_string(workers_.at(static_cast<size_t>(i))->port()); }
  rpc::Worker& worker(int i) { return *workers_.at(static_cast<size_t>(i)); }
  Device& device(int i) { return *devices_.at(static_cast<size_t>(i)); }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<rpc::Worker>> workers_;
};

}  // namespace weft::testing
