// Devices by spec string: the one parser every tool and the Session use.
//
//   cpu              this machine's CPU, all hardware threads
//   cpu:THREADS      the CPU with THREADS threads (1..4096)
//   rpc://HOST:PORT  device 0 of a `weft worker` ("[v6addr]:PORT" works too)
//   rpc://HOST:PORT/N  device N of that worker (0..63)
//   async            the asynchronous test device (include/weft/testing/async.h),
//   async-copy       and the same with memory of its own, like a GPU's
//
//   auto specs = weft::parse_device_specs("cpu:4,rpc://10.0.0.2:50052");
//   auto dev = weft::open_device(specs[1]);          // connects
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/backend/backend.h"
#include "weft/rpc/client.h"

namespace weft {

enum class DeviceSpecKind { cpu, rpc, async, async_copy };

struct DeviceSpec {
  DeviceSpecKind kind = DeviceSpecKind::cpu;
  int threads = 0;        // cpu: 0 = the default (DeviceOptions::cpu_threads)
  std::string endpoint;   // rpc: "HOST:PORT" as written, or "tls://HOST:PORT[#sha256:HEX]"
  int index = 0;          // rpc: device index on the worker
  std::string text;       // the spec as given (trimmed), for messages

  // What people call the device in plans and errors: "host" for this CPU,
  // the endpoint ("10.0.0.2:50052", with "/N" past device 0) for a worker,
  // the spec text otherwise.
  std::string label() const;
};

// One spec. Throws Error(invalid_input) naming the spec and what is wrong
// with it, and listing the known forms for an unknown one.
DeviceSpec parse_device_spec(std::string_view spec);
// A comma-separated list (spaces around items ignored). Throws as above; an
// empty list or item is an error.
std::vector<DeviceSpec> parse_device_specs(std::string_view list);
// "HOST:PORT" of `--worker HOST:PORT` as the spec "rpc://HOST:PORT".
DeviceSpec worker_device_spec(std::string_view endpoint);

// A workers file (`--workers-file`, re-read by `weft serve` on SIGHUP): one
// worker per line as `--worker` takes it (HOST:PORT, or a tls:// spec);
// `#` starts a comment, blank lines are skipped. The specs in file order,
// each once. Throws Error(invalid_input) naming the file and line of a
// malformed entry, or for more than kMaxWorkersInFile entries or a file
// over kMaxWorkersFileBytes; read_workers_file also when it cannot be read.
inline constexpr size_t kMaxWorkersInFile = 256;
inline constexpr size_t kMaxWorkersFileBytes = size_t{1} << 20;
std::vector<DeviceSpec> parse_workers_file(std::string_view text, const std::string& name);
std::vector<DeviceSpec> read_workers_file(const std::string& path);

struct DeviceOptions {
  int cpu_threads = 0;      // threads of a "cpu" spec without :THREADS; 0: hardware threads
  RpcOptions rpc;           // connections this opens
  uint64_t async_seed = 1;  // async devices: the random delay's stream
  double async_random_delay_ms = 0.05;  // async devices: so that ordering bugs show
};

// Makes (and for rpc, connects to) the device. Throws Error(disconnected)
// when a worker cannot be reached, Error(invalid_input) when it has no
// device spec.index.
std::unique_ptr<Device> open_device(const DeviceSpec& spec, const DeviceOptions& options = {});

}  // namespace weft
