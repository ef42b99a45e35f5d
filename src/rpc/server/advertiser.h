// `weft worker --advertise`: a thread that broadcasts the worker's beacon
// (client/beacon.h) every `every` on the IPv4 networks it listens on: the
// loopback network for 127.0.0.1, the interface of a specific address, or
// every interface for 0.0.0.0 (each beacon sent from, and naming, that
// interface's address). Errors of one send are logged once and retried at
// the next beacon.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "client/beacon.h"

namespace weft::rpc {

class Advertiser {
 public:
  // make(): the beacon's facts now (port, devices...); address and time are filled in here.
  Advertiser(std::string listen_host, uint16_t udp_port, std::chrono::milliseconds every, std::function<Beacon()> make,
             std::optional<std::string> secret, bool log);
  ~Advertiser();  // stops and joins
  Advertiser(const Advertiser&) = delete;
  Advertiser& operator=(const Advertiser&) = delete;

  uint64_t sent() const;  // beacons sent (datagrams), for tests

 private:
  void loop();
  void send_all();

  const std::string host_;
  const uint16_t udp_port_;
  const std::chrono::milliseconds every_;
  const std::function<Beacon()> make_;
  const std::optional<std::string> secret_;
  const bool log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool warned_ = false;
  uint64_t sent_ = 0;
  std::thread thread_;
};

}  // namespace weft::rpc
