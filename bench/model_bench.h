// `weft bench model`: how fast a loaded model processes a prompt and
// generates tokens, each beside the machine limit that bounds it, measured
// in the same run (docs/performance.md).
//
//   Session s(options);                                  // the tool: session_ui.h
//   const LoadPlan plan = s.load(model_bench_context(o));
//   const ModelWork w = model_work(*GgufFile::open(path), plan);
//   const ModelBenchResult r = run_model_bench(s, w, o);
//   std::fputs(format_model_bench_text(r).c_str(), stdout);
//
// The tests follow llama.cpp's llama-bench so the figures compare: "pp"
// evaluates n_prompt tokens as one batch from position 0; "tg" evaluates
// n_gen tokens one at a time from position `depth` (0 by default, not after
// the prompt; llama-bench's -d: the cache first holds depth tokens); the
// tokens are the model's bos then pseudo-random ids; one warm-up (the prompt
// and one generated token) before reps repetitions of each; tokens/s is the
// mean and sample standard deviation of the repetitions' rates.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "fma_peak.h"
#include "model_work.h"
#include "weft/runtime/session.h"

namespace weft::bench {

struct ModelBenchOptions {
  int n_prompt = 512;        // tokens of the prompt test; 0: skip it
  int n_gen = 128;           // tokens of the generation test; 0: skip it
  int depth = 0;             // positions in the KV cache before the generation test
  int reps = 5;              // repetitions of each, after one warm-up
  int n_threads = 0;         // threads of the limit measurements (the host CPU's); 0: hardware threads
  std::FILE* log = nullptr;  // progress lines ("measuring memory bandwidth ...") when non-null
  bool measure_limits = true;  // false: skip the memory bandwidth and FMA peak (a baseline run)
  // > 1: also generate n_gen tokens for this many sequences at once
  // (Session::generate_parallel: their steps pipelined over the devices),
  // each from one token, its own part of the KV cache.
  int parallel = 1;
};

// The KV cache positions a Session needs for these tests: the prompt's, or
// depth + n_gen, or parallel parts of n_gen + 1, whichever is largest (at
// least 1), rounded up to a multiple of parallel.
int64_t model_bench_context(const ModelBenchOptions& o);

// The mean and sample standard deviation (0 for one sample) of a figure
// over the repetitions.
struct Spread {
  double mean = 0;
  double stddev = 0;
};

struct ModelBenchResult {
  ModelBenchOptions options;  // as run (n_threads resolved)
  std::string model;          // the Session's model path
  std::string cpu_kernels;    // cpu_simd_level()
  size_t devices = 0;         // devices of the Session (1: this CPU alone)
  int64_t n_layer = 0;
  ModelWork work;

  // Limits, measured before the tests with options.n_threads threads.
  double memory_read_bytes_per_s = 0;  // memory_bandwidth.h (a buffer several times the last-level cache)
  FmaPeak fma;                         // fma_peak.h

  // Prompt processing (valid when options.n_prompt > 0).
  double pp_flops = 0;  // prompt_flops(work, n_prompt)
  Spread pp_tokens_per_s;
  Spread pp_flops_per_s;   // pp_flops / seconds, per repetition
  Spread pp_host_seconds;  // wall minus CPU kernel time (cpu_compute_stats) per prompt
  double pp_fraction = 0;  // pp_flops_per_s.mean / fma.flops_per_s

  // Generation (valid when options.n_gen > 0).
  double tg_bytes_per_token = 0;  // decode_bytes at the average KV length (n_gen + 1) / 2
  Spread tg_tokens_per_s;
  Spread tg_bytes_per_s;
  Spread tg_seconds_per_token;         // wall time per token
  Spread tg_kernel_seconds_per_token;  // CPU kernel time per token
  Spread tg_host_seconds_per_token;    // the difference: the host's own time
  double tg_fraction = 0;              // tg_bytes_per_s.mean / memory_read_bytes_per_s
  // Several sequences (valid when options.parallel > 1 and n_gen > 0): the
  // tokens of all of them per second of the whole call.
  Spread tg_parallel_tokens_per_s;

  // Over workers (set by the caller, see per_hop_seconds): a token's hops
  // (host -> each worker holding layers -> host), the same generation test
  // with every layer on this host, and what each hop costs beyond it.
  int hops = 0;  // 0: every layer on this host; the fields below are unset
  double local_tg_seconds_per_token = 0;
  double tg_seconds_per_hop = 0;

  // With a tensor split (set by the caller): per generated token, the
  // bytes to and from the workers, the round trips, and the time this host
  // waited for replies (the partial sums: a worker's compute beyond this
  // host's share, plus the link); and the same tests with every layer on
  // this host, for the speed-up.
  bool tensor_split = false;
  double tp_worker_bytes_per_token = 0;
  double tp_round_trips_per_token = 0;
  double tp_wait_seconds_per_token = 0;
  double local_pp_tokens_per_s = 0;

  // With an expert split (set by the caller): the same tests with each
  // layer's own slice computed before the other devices' are sent
  // (LoadOptions::experts_overlap false), for what overlapping them saves.
  bool experts_split = false;
  double serial_pp_tokens_per_s = 0;
  double serial_tg_seconds_per_token = 0;
  // And with every row sent to every slice (LoadOptions::experts_routed_rows
  // false): the bytes to and from the workers over each whole run, for what
  // sending each device only its tokens' rows saves.
  uint64_t worker_bytes = 0;
  uint64_t all_rows_worker_bytes = 0;
  double all_rows_pp_tokens_per_s = 0;
  double all_rows_tg_seconds_per_token = 0;
};

// (remote - local) / hops: the time a token loses per hop between machines.
inline double per_hop_seconds(double remote_per_token, double local_per_token, int hops) {
  return hops > 0 ? (remote_per_token - local_per_token) / hops : 0;
}

// Runs the limits, the warm-up and the tests on a loaded session whose KV
// cache holds model_bench_context(o) positions. Throws Error(invalid_input)
// for negative counts, reps < 1, no test, or a session that is not loaded
// or too short; errors of the evaluation pass through.
ModelBenchResult run_model_bench(Session& session, const ModelWork& work, const ModelBenchOptions& o);

// One line per figure, each with its limit and fraction, ending in a newline.
std::string format_model_bench_text(const ModelBenchResult& r);
// One JSON object (fields in docs/performance.md), ending in a newline.
std::string format_model_bench_json(const ModelBenchResult& r);

}  // namespace weft::bench
