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

struct CheckArgs {
  std::string backends = "cpu";  // comma-separated backend specs
  std::string filter;            // run only cases whose name contains this
  int threads = 0;               // CPU threads; 0 = hardware threads
  bool quiet = false;            // print failures and the summary only
};


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

void add_check_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "run the backend conformance suite against a float64 reference");
  cmd->add_option("--backend", a->backends, "backend(s) to check: cpu, async, async-copy, rpc://HOST:PORT[/N]; a comma list runs through the scheduler")->capture_default_str();
  cmd->add_option("--filter", a->filter, "only cases whose name contains this");
  cmd->add_option("-t,--threads", a->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", a->quiet, "print only failures and the summary");
  out.push_back({cmd, [a] { return cmd_check(*a); }});
}

}  // namespace weft::tools
