#include "model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <thread>
#include <vector>

#include "memory_bandwidth.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/splitmix64.h"

namespace weft::bench {
namespace {

constexpr const char* kWhere = "bench model";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() < 2) return s;
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(sq / static_cast<double>(v.size() - 1));
  return s;
}

// The test's tokens: bos when the model adds one, then pseudo-random ids
// (as llama-bench; a fixed seed, so every run evaluates the same ones).
std::vector<int32_t> bench_tokens(const Session& s, int n, uint64_t seed) {
  if (s.params().n_vocab <= 0) fail(ErrorKind::invalid_input, kWhere, "the model has no vocabulary");
  std::vector<int32_t> t(static_cast<size_t>(n));
  const auto n_vocab = static_cast<uint64_t>(s.params().n_vocab);
  for (auto& id : t) id = static_cast<int32_t>(splitmix64(seed) % n_vocab);
  if (!t.empty() && s.tokenizer().add_bos() && s.tokenizer().bos() >= 0) t[0] = s.tokenizer().bos();
  return t;
}

// Wall and CPU-kernel seconds of one call of f.
struct Timed {
  double wall = 0;
  double kernel = 0;
};
template <typename F>
Timed timed(F&& f) {
  const double k0 = cpu_compute_stats().seconds;
  const double t0 = now_seconds();
  f();
  const double t1 = now_seconds();
  return {t1 - t0, cpu_compute_stats().seconds - k0};
}

void log_line(std::FILE* log, const char* format, ...) {
  if (log == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(log, format, args);
  va_end(args);
  std::fflush(log);
}

}  // namespace

int64_t model_bench_context(const ModelBenchOptions& o) {
  const int64_t parts = o.parallel > 1 ? static_cast<int64_t>(o.parallel) * (o.n_gen + 1) : 0;
  const int64_t n = std::max<int64_t>({1, o.n_prompt, static_cast<int64_t>(o.depth) + o.n_gen, parts});
  const int64_t p = std::max(1, o.parallel);
  return (n + p - 1) / p * p;  // the sequences' parts divide it
}

namespace {

// The options against the session: Error(invalid_input) naming what cannot be run.
void check_bench_options(const Session& session, const ModelBenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || (o.n_prompt == 0 && o.n_gen == 0))
    fail(ErrorKind::invalid_input, kWhere,
         "prompt " + std::to_string(o.n_prompt) + " and generation " + std::to_string(o.n_gen) +
             " tokens: both >= 0, one > 0");
  if (o.reps < 1) fail(ErrorKind::invalid_input, kWhere, "repetitions " + std::to_string(o.reps) + " (>= 1)");
  if (o.depth < 0) fail(ErrorKind::invalid_input, kWhere, "depth " + std::to_string(o.depth) + " (>= 0)");
  if (o.parallel < 1) fail(ErrorKind::invalid_input, kWhere, "parallel " + std::to_string(o.parallel) + " (>= 1)");
  if (!session.loaded()) fail(ErrorKind::invalid_input, kWhere, "the session's model is not loaded");
  if (session.n_ctx() < model_bench_context(o))
    fail(ErrorKind::invalid_input, kWhere,
         "the session holds " + std::to_string(session.n_ctx()) + " positions; the tests need " +
             std::to_string(model_bench_context(o)));
}

// pp: the prompt evaluated as one batch from position 0, o.reps times.
void measure_prompt(Session& session, const ModelWork& work, const ModelBenchOptions& o,
                    const std::vector<int32_t>& prompt, ModelBenchResult& r) {
  log_line(o.log, "pp%d: %d repetitions ...\n", o.n_prompt, o.reps);
  r.pp_flops = prompt_flops(work, o.n_prompt);
  std::vector<double> tps, fps, host;
  for (int rep = 0; rep < o.reps; ++rep) {
    const Timed t = timed([&] { (void)session.eval(prompt, 0, model::LogitRows::last); });
    tps.push_back(o.n_prompt / t.wall);
    fps.push_back(r.pp_flops / t.wall);
    host.push_back(t.wall - t.kernel);
  }
  r.pp_tokens_per_s = spread(tps);
  r.pp_flops_per_s = spread(fps);
  r.pp_host_seconds = spread(host);
  r.pp_fraction = r.fma.flops_per_s > 0 ? r.pp_flops_per_s.mean / r.fma.flops_per_s : 0;
}

// tg: o.n_gen tokens one at a time after o.depth positions, o.reps times.
void measure_generation(Session& session, const ModelWork& work, const ModelBenchOptions& o,
                        const std::vector<int32_t>& gen, ModelBenchResult& r) {
  log_line(o.log, "tg%d: %d repetitions ...\n", o.n_gen, o.reps);
  double bytes = 0;  // averaged over the positions the test evaluates
  for (int64_t pos = o.depth; pos < o.depth + o.n_gen; ++pos) bytes += decode_bytes(work, pos + 1);
  r.tg_bytes_per_token = bytes / o.n_gen;
  std::vector<double> tps, bps, wall, kernel, host;
  for (int rep = 0; rep < o.reps; ++rep) {
    const Timed t = timed([&] {
      for (int i = 0; i < o.n_gen; ++i)
        (void)session.eval(std::span(gen).subspan(static_cast<size_t>(i), 1), o.depth + i);
    });
    tps.push_back(o.n_gen / t.wall);
    bps.push_back(r.tg_bytes_per_token * o.n_gen / t.wall);
    wall.push_back(t.wall / o.n_gen);
    kernel.push_back(t.kernel / o.n_gen);
    host.push_back((t.wall - t.kernel) / o.n_gen);
  }
  r.tg_tokens_per_s = spread(tps);
  r.tg_bytes_per_s = spread(bps);
  r.tg_seconds_per_token = spread(wall);
  r.tg_kernel_seconds_per_token = spread(kernel);
  r.tg_host_seconds_per_token = spread(host);
  r.tg_fraction = r.memory_read_bytes_per_s > 0 ? r.tg_bytes_per_s.mean / r.memory_read_bytes_per_s : 0;
}

// The generation test over o.parallel sequences at once.
void measure_parallel(Session& session, const ModelBenchOptions& o, const std::vector<int32_t>& gen,
                      ModelBenchResult& r) {
  // Each sequence from one token, in its own part of the cache; every
  // token counted, the end of generation ignored, so each run does the
  // same work. The first run warms the sequences' graphs up.
  log_line(o.log, "tg%d x %d sequences: %d repetitions ...\n", o.n_gen, o.parallel, o.reps);
  std::vector<std::vector<int32_t>> starts;
  for (int s = 0; s < o.parallel; ++s) starts.push_back({gen[static_cast<size_t>(s) % gen.size()]});
  GenerateOptions go;
  go.max_tokens = o.n_gen;
  go.stop_at_end_of_generation = false;
  (void)session.generate_parallel(starts, go);
  std::vector<double> tps;
  for (int rep = 0; rep < o.reps; ++rep) {
    const Timed t = timed([&] { (void)session.generate_parallel(starts, go); });
    tps.push_back(static_cast<double>(o.n_gen) * o.parallel / t.wall);
  }
  r.tg_parallel_tokens_per_s = spread(tps);
}

}  // namespace

ModelBenchResult run_model_bench(Session& session, const ModelWork& work, const ModelBenchOptions& o) {
  check_bench_options(session, o);
  ModelBenchResult r;
  r.options = o;
  if (r.options.n_threads <= 0)
    r.options.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  r.model = session.options().model;
  r.cpu_kernels = cpu_simd_level();
  r.devices = session.options().devices.size();
  r.n_layer = session.params().n_layer;
  r.work = work;

  const int nth = r.options.n_threads;
  if (o.measure_limits) {
    log_line(o.log, "measuring memory bandwidth (%d threads) ...\n", nth);
    r.memory_read_bytes_per_s = measure_memory_bandwidth(nth).read_bytes_per_s;
    log_line(o.log, "measuring the FMA peak (%d threads) ...\n", nth);
    r.fma = measure_fma_peak(nth);
  }

  const std::vector<int32_t> prompt = bench_tokens(session, o.n_prompt, 0x5eed);
  const std::vector<int32_t> gen = bench_tokens(session, o.n_gen, 0x6e6);
  log_line(o.log, "warming up ...\n");
  if (o.n_prompt > 0) (void)session.eval(prompt, 0, model::LogitRows::last);
  if (o.n_gen > 0 && o.depth > 0) {  // the cache the generation test reads, filled once
    const std::vector<int32_t> context = bench_tokens(session, o.depth, 0xde97);
    (void)session.eval(context, 0, model::LogitRows::last);
  }
  if (o.n_gen > 0) (void)session.eval(std::span(gen).first(1), o.depth);
  if (o.n_prompt > 0) measure_prompt(session, work, o, prompt, r);
  if (o.n_gen > 0) measure_generation(session, work, o, gen, r);
  if (o.n_gen > 0 && o.parallel > 1) measure_parallel(session, o, gen, r);
  return r;
}

}  // namespace weft::bench
