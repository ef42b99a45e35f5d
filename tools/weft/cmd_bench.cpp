// `weft bench ops`, `gemm` and `rpc` (bench/): each measurement beside the
// limit that bounds it, measured in the same run. `weft bench model` is
// cmd_bench_model.cpp.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "gemm_bench.h"
#include "ops_bench.h"
#include "rpc_bench.h"
#include "weft/core/error.h"

namespace weft::tools {

struct BenchOpsArgs {
  int threads = 0;
  std::string filter;
  double min_seconds = 0.2;  // time each measurement at least this long
};

struct BenchRpcArgs {
  std::string endpoint;  // empty: an in-process worker
  int threads = 0;
  size_t upload_bytes = size_t{256} << 20;
};

int cmd_bench_ops(const BenchOpsArgs& args) {
  return bench::run_ops_bench({args.threads, args.filter, args.min_seconds});
}

int cmd_bench_gemm(const BenchOpsArgs& args) {
  return bench::run_gemm_bench({args.threads, args.filter, args.min_seconds});
}

int cmd_bench_rpc(const BenchRpcArgs& args) {
  bench::RpcBenchOptions options;
  options.endpoint = args.endpoint;
  options.n_threads = args.threads;
  options.upload_bytes = args.upload_bytes;
  return bench::run_rpc_bench(options);
}

namespace {

void add_ops_options(CLI::App* cmd, BenchOpsArgs& a, const char* filter_help) {
  cmd->add_option("-t,--threads", a.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--filter", a.filter, filter_help);
  cmd->add_option("--min-time", a.min_seconds, "seconds per measurement")->capture_default_str();
}

void add_rpc_options(CLI::App* cmd, BenchRpcArgs& a) {
  cmd->add_option("--worker", a.endpoint, "HOST:PORT of a running worker (default: one in-process)");
  cmd->add_option("-t,--threads", a.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_size_option(cmd, "--upload", a.upload_bytes, "bytes uploaded (default 256MiB)");
  cmd->add_option_function<size_t>(
      "--upload-mib", [&a](size_t mib) {
        if (mib > (SIZE_MAX >> 20)) throw CLI::ValidationError("--upload-mib " + std::to_string(mib) + " is too large");
        a.upload_bytes = mib << 20;
      },
      "MiB uploaded (the same as --upload NMiB)");
}


}  // namespace

void add_bench_commands(CLI::App& app, Commands& out) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that report ratios against this machine's limits");
  bench->require_subcommand(1);
  auto ops = std::make_shared<BenchOpsArgs>();
  CLI::App* ops_cmd = bench->add_subcommand("ops", "time each op's kernel against memory bandwidth");
  add_ops_options(ops_cmd, *ops, "only benchmarks whose name contains this");
  out.push_back({ops_cmd, [ops] { return cmd_bench_ops(*ops); }});

  auto gemm = std::make_shared<BenchOpsArgs>();
  CLI::App* gemm_cmd = bench->add_subcommand("gemm", "float-weight matrix products (prompts) against the FMA peak");
  add_ops_options(gemm_cmd, *gemm, "only rows whose name contains this");
  out.push_back({gemm_cmd, [gemm] { return cmd_bench_gemm(*gemm); }});

  auto rpc = std::make_shared<BenchRpcArgs>();
  CLI::App* rpc_cmd = bench->add_subcommand("rpc", "RPC upload, latency and a graph chain against loopback limits");
  add_rpc_options(rpc_cmd, *rpc);
  out.push_back({rpc_cmd, [rpc] { return cmd_bench_rpc(*rpc); }});


  add_bench_model_command(bench, out);
}

}  // namespace weft::tools
