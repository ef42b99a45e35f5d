// `weft check`: runs the backend conformance suite.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "conformance/conformance.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"
#include "weft/testing/async.h"

namespace weft::tools {
namespace {

std::vector<std::string> split_specs(const std::string& list) {
  std::vector<std::string> specs;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string spec = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = spec.find_first_not_of(" \t");
    const size_t e = spec.find_last_not_of(" \t");
    specs.push_back(b == std::string::npos ? "" : spec.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return specs;
}

// A device for one backend spec, or nullptr for an unknown one. Async
// devices get a small random delay so that ordering bugs show.
std::unique_ptr<Device> make_device(const std::string& spec, int threads, uint64_t seed) {
  if (spec == "cpu") return make_cpu_device(threads);
  if (spec == "async" || spec == "async-copy") {
    AsyncOptions options;
    options.n_threads = threads > 0 ? threads : 1;
    options.random_delay_ms = 0.05;
    options.seed = seed;
    options.isolated_memory = spec == "async-copy";
    return make_async_device(options);
  }
  if (spec.rfind("rpc://", 0) == 0) return make_rpc_device_from_spec(spec);
  return nullptr;
}

}  // namespace

int cmd_check(const CheckArgs& args) {
  const std::vector<std::string> specs = split_specs(args.backends);
  try {
    std::vector<std::unique_ptr<Device>> devices;
    for (const std::string& spec : specs) {
      devices.push_back(make_device(spec, args.threads, devices.size() + 1));
      if (!devices.back()) {
        std::cerr << "weft check: unknown backend '" << spec << "' (known: cpu, async, async-copy, rpc://HOST:PORT[/N])\n";
        return 2;
      }
    }
    std::vector<std::unique_ptr<Backend>> backends;
    std::unique_ptr<conformance::Executor> ex;
    if (devices.size() == 1) {
      ex = conformance::make_backend_executor(*devices[0], args.threads);
    } else {
      std::vector<Backend*> list;
      for (auto& dev : devices) list.push_back(backends.emplace_back(dev->create_backend()).get());
      ex = conformance::make_scheduler_executor(list);
    }
    const conformance::Summary s = conformance::run_suite(*ex, std::cout, args.filter, args.quiet);
    return s.failed > 0 ? 1 : 0;
  } catch (const Error& e) {
    std::cerr << "weft check: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace weft::tools
