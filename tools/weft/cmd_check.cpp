// `weft check`: runs the backend conformance suite.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "conformance/conformance.h"
#include "weft/cpu.h"
#include "weft/error.h"

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

}  // namespace

int cmd_check(const CheckArgs& args) {
  const std::vector<std::string> specs = split_specs(args.backends);
  for (const std::string& spec : specs) {
    if (spec != "cpu") {
      std::cerr << "weft check: unknown backend '" << spec << "' (known: cpu)\n";
      return 2;
    }
  }
  if (specs.size() > 1) {
    std::cerr << "weft check: checking several backends at once (" << args.backends
              << ") needs the multi-backend scheduler, which is not built yet\n";
    return 2;
  }
  try {
    std::unique_ptr<Device> dev = make_cpu_device(args.threads);
    std::unique_ptr<conformance::Executor> ex = conformance::make_backend_executor(*dev, args.threads);
    const conformance::Summary s = conformance::run_suite(*ex, std::cout, args.filter, args.quiet);
    return s.failed > 0 ? 1 : 0;
  } catch (const Error& e) {
    std::cerr << "weft check: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace weft::tools
