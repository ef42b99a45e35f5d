#include <signal.h>

#include <cstdio>

#include "commands.h"
#include "gemm_bench.h"
#include "model_bench.h"
#include "ops_bench.h"
#include "rpc_bench.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft::tools {

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

int cmd_bench_model(const BenchModelArgs& args) {
  constexpr const char* kWhere = "bench model";
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal
  bench::ModelBenchOptions options;
  options.n_prompt = args.n_prompt;
  options.n_gen = args.n_gen;
  options.depth = args.depth;
  options.reps = args.reps;
  options.parallel = args.parallel;
  options.n_threads = args.host.threads;  // the host CPU's threads; 0: hardware threads, as the device
  options.log = stderr;
  if (options.n_prompt == 0 && options.n_gen == 0)
    fail(ErrorKind::invalid_input, kWhere, "-p 0 and -n 0: nothing to measure");

  Session session(session_options(args.host, kWhere));
  const LoadPlan plan = load_with_progress(session, bench::model_bench_context(options));
  // The Session closed its file after loading; the tensor table tells what
  // each token reads and computes on this host.
  const bench::ModelWork work = bench::model_work(*GgufFile::open(args.host.model), plan);
  // Bytes to and from the workers over a run (an expert split compares them).
  auto worker_bytes = [](const Session& s) {
    uint64_t b = 0;
    for (const DeviceStats& d : s.stats())
      if (d.remote) b += d.rpc.bytes_sent + d.rpc.bytes_received;
    return b;
  };
  const uint64_t bytes_before = worker_bytes(session);
  bench::ModelBenchResult r = bench::run_model_bench(session, work, options);
  r.worker_bytes = worker_bytes(session) - bytes_before;
  // Over workers: the same generation test with every layer here, for what
  // each hop between machines costs a token.
  int hops = 0;
  for (const DevicePlan& d : plan.devices)
    if (d.label != "host" && d.part.last_layer > d.part.first_layer) ++hops;
  if (hops > 0 && options.n_gen > 0) {
    ModelHostArgs local_args = args.host;
    local_args.workers.clear();
    local_args.devices.clear();
    local_args.split.clear();
    std::fprintf(stderr, "the same generation test with every layer on this host:\n");
    Session local(session_options(local_args, kWhere));
    (void)load_with_progress(local, bench::model_bench_context(options));
    bench::ModelBenchOptions local_options = options;
    local_options.n_prompt = 0;
    local_options.measure_limits = false;
    local_options.parallel = 1;
    const bench::ModelBenchResult l = bench::run_model_bench(local, work, local_options);
    r.hops = hops + 1;  // host -> each worker holding layers -> host
    r.local_tg_seconds_per_token = l.tg_seconds_per_token.mean;
    r.tg_seconds_per_hop = bench::per_hop_seconds(r.tg_seconds_per_token.mean, r.local_tg_seconds_per_token, r.hops);
  }
  // An expert split: the same tests with each layer's own slice first, for
  // what overlapping the devices' slices saves.
  if (!args.host.experts_split.empty()) {
    std::fprintf(stderr, "the same tests with the experts serialised (the host's slice before the others):\n");
    SessionOptions serial_options = session_options(args.host, kWhere);
    serial_options.load.experts_overlap = false;
    Session serial(serial_options);
    (void)load_with_progress(serial, bench::model_bench_context(options));
    bench::ModelBenchOptions serial_bench = options;
    serial_bench.measure_limits = false;
    serial_bench.parallel = 1;
    const bench::ModelBenchResult s = bench::run_model_bench(serial, work, serial_bench);
    r.experts_split = true;
    r.serial_pp_tokens_per_s = s.pp_tokens_per_s.mean;
    r.serial_tg_seconds_per_token = s.tg_seconds_per_token.mean;

    std::fprintf(stderr, "the same tests with every row sent to every slice:\n");
    SessionOptions rows_options = session_options(args.host, kWhere);
    rows_options.load.experts_routed_rows = false;
    Session all_rows(rows_options);
    (void)load_with_progress(all_rows, bench::model_bench_context(options));
    const uint64_t rows_before = worker_bytes(all_rows);
    bench::ModelBenchOptions rows_bench = options;
    rows_bench.measure_limits = false;
    const bench::ModelBenchResult a = bench::run_model_bench(all_rows, work, rows_bench);
    r.all_rows_worker_bytes = worker_bytes(all_rows) - rows_before;
    r.all_rows_pp_tokens_per_s = a.pp_tokens_per_s.mean;
    r.all_rows_tg_seconds_per_token = a.tg_seconds_per_token.mean;
  }
  const std::string report = args.json ? bench::format_model_bench_json(r) : bench::format_model_bench_text(r);
  std::fputs(report.c_str(), stdout);
  if (!args.json) print_device_stats(session);
  return 0;
}

}  // namespace weft::tools
