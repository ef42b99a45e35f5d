#include "commands.h"
#include "ops_bench.h"

namespace weft::tools {

int cmd_bench_ops(const BenchOpsArgs& args) {
  return bench::run_ops_bench({args.threads, args.filter, args.min_seconds});
}

}  // namespace weft::tools
