// The subcommands of the `weft` executable. main.cpp parses arguments with
// CLI11 and calls one of these; each returns the process exit code.
#pragma once

#include <string>

namespace weft::tools {

struct CheckArgs {
  std::string backends = "cpu";  // comma-separated backend specs
  std::string filter;            // run only cases whose name contains this
  int threads = 0;               // CPU threads; 0 = hardware threads
  bool quiet = false;            // print failures and the summary only
};
int cmd_check(const CheckArgs& args);

struct BenchOpsArgs {
  int threads = 0;
  std::string filter;
  double min_seconds = 0.2;  // time each measurement at least this long
};
int cmd_bench_ops(const BenchOpsArgs& args);

}  // namespace weft::tools
