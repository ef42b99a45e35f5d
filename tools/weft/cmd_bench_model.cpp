// `weft bench model`: prompt processing and generation speed of a model
// (bench/model_bench.h) against this machine's limits.
#include <signal.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "model_bench.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft::tools {
namespace {

// `weft bench model`: prompt processing and generation speed of a model
// (bench/model_bench.h), each beside the limit that bounds it, measured in
// the same run; text, or one JSON object for scripts.
struct BenchModelArgs {
  ModelHostArgs host;
  int n_prompt = 512;  // tokens of the prompt test (pp); 0: skip it
  int n_gen = 128;     // tokens of the generation test (tg); 0: skip it
  int depth = 0;       // KV cache positions filled before the generation test
  int reps = 5;        // repetitions of each, after one warm-up
  bool json = false;   // one JSON object on stdout instead of text
  int parallel = 1;    // > 1: also the generation test over this many sequences at once
};

constexpr const char* kCmdBenchModelWhere = "bench model";

// Bytes to and from the workers over a run (an expert split compares them).
uint64_t worker_bytes(const Session& s) {
  uint64_t b = 0;
  for (const DeviceStats& d : s.stats())
    if (d.remote) b += d.rpc.bytes_sent + d.rpc.bytes_received;
  return b;
}

// Over workers: the same generation test with every layer here, for what
// each hop between machines costs a token.
void measure_hops(const BenchModelArgs& args, const LoadPlan& plan, const bench::ModelWork& work,
                  const bench::ModelBenchOptions& options, bench::ModelBenchResult& r) {
  int hops = 0;
  for (const DevicePlan& d : plan.devices)
    if (d.label != "host" && d.part.last_layer > d.part.first_layer) ++hops;
  if (hops == 0 || options.n_gen == 0) return;
  ModelHostArgs local_args = args.host;
  local_args.workers.clear();
  local_args.devices.clear();
  local_args.split.clear();
  std::fprintf(stderr, "the same generation test with every layer on this host:\n");
  Session local(session_options(local_args, kCmdBenchModelWhere));
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

// A tensor split: per generated token, the traffic to the workers and the
// time this host waits for their partials (16 tokens evaluated here), then
// the same tests with every layer on this host, for the speed-up.
void measure_tensor_split(const BenchModelArgs& args, Session& session, const bench::ModelWork& work,
                          const bench::ModelBenchOptions& options, bench::ModelBenchResult& r) {
  auto totals = [&session] {
    RpcStats t;
    for (const DeviceStats& d : session.stats())
      if (d.remote) {
        t.bytes_sent += d.rpc.bytes_sent + d.rpc.bytes_received;
        t.round_trips += d.rpc.round_trips;
        t.wait_seconds += d.rpc.wait_seconds;
      }
    return t;
  };
  constexpr int kTokens = 16;
  const RpcStats before = totals();
  const int32_t token = 1;
  for (int i = 0; i < kTokens; ++i) (void)session.eval({&token, 1}, i, model::LogitRows::last);
  const RpcStats after = totals();
  r.tensor_split = true;
  r.tp_worker_bytes_per_token = static_cast<double>(after.bytes_sent - before.bytes_sent) / kTokens;
  r.tp_round_trips_per_token = static_cast<double>(after.round_trips - before.round_trips) / kTokens;
  r.tp_wait_seconds_per_token = (after.wait_seconds - before.wait_seconds) / kTokens;

  ModelHostArgs local_args = args.host;
  local_args.workers.clear();
  local_args.devices.clear();
  local_args.split.clear();
  local_args.split_mode = "layer";
  std::fprintf(stderr, "the same tests with every layer on this host:\n");
  Session local(session_options(local_args, kCmdBenchModelWhere));
  (void)load_with_progress(local, bench::model_bench_context(options));
  bench::ModelBenchOptions local_options = options;
  local_options.measure_limits = false;
  local_options.parallel = 1;
  const bench::ModelBenchResult l = bench::run_model_bench(local, work, local_options);
  r.local_pp_tokens_per_s = l.pp_tokens_per_s.mean;
  r.local_tg_seconds_per_token = l.tg_seconds_per_token.mean;
}

// An expert split: the same tests with each layer's own slice first, for
// what overlapping the devices' slices saves, then with every row sent to
// every slice.
void measure_expert_variants(const BenchModelArgs& args, const bench::ModelWork& work,
                             const bench::ModelBenchOptions& options, bench::ModelBenchResult& r) {
  std::fprintf(stderr, "the same tests with the experts serialised (the host's slice before the others):\n");
  SessionOptions serial_options = session_options(args.host, kCmdBenchModelWhere);
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
  SessionOptions rows_options = session_options(args.host, kCmdBenchModelWhere);
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

int cmd_bench_model(const BenchModelArgs& args) {
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
    fail(ErrorKind::invalid_input, kCmdBenchModelWhere, "-p 0 and -n 0: nothing to measure");

  Session session(session_options(args.host, kCmdBenchModelWhere));
  const LoadPlan plan = load_with_progress(session, bench::model_bench_context(options));
  // The Session closed its file after loading; the tensor table tells what
  // each token reads and computes on this host.
  const bench::ModelWork work = bench::model_work(*GgufFile::open(args.host.model), plan);
  const uint64_t bytes_before = worker_bytes(session);
  bench::ModelBenchResult r = bench::run_model_bench(session, work, options);
  r.worker_bytes = worker_bytes(session) - bytes_before;
  if (args.host.split_mode == "tensor")
    measure_tensor_split(args, session, work, options, r);
  else
    measure_hops(args, plan, work, options, r);
  if (!args.host.experts_split.empty()) measure_expert_variants(args, work, options, r);
  const std::string report = args.json ? bench::format_model_bench_json(r) : bench::format_model_bench_text(r);
  std::fputs(report.c_str(), stdout);
  if (!args.json) print_device_stats(session);
  return 0;
}

void add_model_options(CLI::App* cmd, BenchModelArgs& a) {
  add_model_host_options(cmd, a.host);
  cmd->add_option("-p,--n-prompt", a.n_prompt, "prompt tokens, one batch from position 0 (0: skip)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", a.n_gen, "tokens generated one at a time after --depth positions (0: skip)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--depth", a.depth, "KV cache positions filled before the generation test")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--repetitions", a.reps, "repetitions of each test, after one warm-up")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", a.json, "one JSON object on stdout (fields: docs/performance.md)");
  cmd->add_option("--parallel", a.parallel,
                  "also generate -n tokens for this many sequences at once, pipelined over the devices")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

}  // namespace

void add_bench_model_command(CLI::App* bench, Commands& out) {
  auto a = std::make_shared<BenchModelArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "model", "prompt and generation speed of a model (as llama-bench's pp/tg) against this machine's limits");
  add_model_options(cmd, *a);
  out.push_back({cmd, [a] { return cmd_bench_model(*a); }});
}

}  // namespace weft::tools
