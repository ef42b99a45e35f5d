#include "commands.h"
#include "ops_bench.h"
#include "rpc_bench.h"

namespace weft::tools {

int cmd_bench_ops(const BenchOpsArgs& args) {
  return bench::run_ops_bench({args.threads, args.filter, args.min_seconds});
}

int cmd_bench_rpc(const BenchRpcArgs& args) {
  bench::RpcBenchOptions options;
  options.endpoint = args.endpoint;
  options.n_threads = args.threads;
  options.upload_bytes = args.upload_mib << 20;
  return bench::run_rpc_bench(options);
}

}  // namespace weft::tools
