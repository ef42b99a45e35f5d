// `weft check`: runs the backend conformance suite.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "conformance/conformance.h"
#include "weft/core/error.h"
#include "weft/runtime/devices.h"

namespace weft::tools {

int cmd_check(const CheckArgs& args) {
  try {
    // Async devices get a small random delay so that ordering bugs show,
    // each from a stream of its own.
    DeviceOptions options;
    options.cpu_threads = args.threads;
    std::vector<std::unique_ptr<Device>> devices;
    for (const DeviceSpec& spec : parse_device_specs(args.backends)) {
      options.async_seed = devices.size() + 1;
      devices.push_back(open_device(spec, options));
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
