// The text and JSON reports of `weft bench model` (model_bench.h).
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "cache_info.h"
#include "model_bench.h"

namespace weft::bench {
namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

// A JSON string literal of s: quotes, backslashes and control bytes escaped;
// other bytes as they are (a path is bytes, usually UTF-8).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += printf_string("\\u%04x", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A finite number as JSON (JSON has no inf or nan: null then).
std::string json_number(double v) {
  return std::isfinite(v) ? printf_string("%.6g", v) : "null";
}

std::string json_spread(const Spread& s, double scale) {
  return "{\"mean\": " + json_number(s.mean * scale) + ", \"stddev\": " + json_number(s.stddev * scale) + "}";
}

}  // namespace

std::string format_model_bench_text(const ModelBenchResult& r) {
  const ModelBenchOptions& o = r.options;
  std::string out;
  out += printf_string("model: %s (layers on this host: %lld of %lld; devices: %zu; threads: %d; CPU kernels: %s)\n",
                       r.model.c_str(), static_cast<long long>(r.work.host_layers), static_cast<long long>(r.n_layer),
                       r.devices, o.n_threads, r.cpu_kernels.c_str());
  out += printf_string(
      "memory read bandwidth: %.2f GB/s (threads: %d; a buffer several times the %.0f MiB last-level cache)\n",
      r.memory_read_bytes_per_s * 1e-9, o.n_threads, static_cast<double>(last_level_cache_bytes()) / (1 << 20));
  out += printf_string("FMA peak: %.1f GFLOP/s (%s; avx2 %.1f", r.fma.flops_per_s * 1e-9, r.fma.isa,
                       r.fma.avx2_flops_per_s * 1e-9);
  out += r.fma.avx512_flops_per_s > 0 ? printf_string(", avx512 %.1f GFLOP/s)\n", r.fma.avx512_flops_per_s * 1e-9)
                                      : std::string(" GFLOP/s; no avx512)\n");
  if (o.n_prompt > 0) {
    const int p = o.n_prompt;
    out += printf_string("pp%d: %.2f ± %.2f tokens/s\n", p, r.pp_tokens_per_s.mean, r.pp_tokens_per_s.stddev);
    out += printf_string("pp%d: %.2f ± %.2f GFLOP/s = %.3f of the FMA peak (%.1f GFLOP/s); %.3f GFLOP per prompt\n", p,
                         r.pp_flops_per_s.mean * 1e-9, r.pp_flops_per_s.stddev * 1e-9, r.pp_fraction,
                         r.fma.flops_per_s * 1e-9, r.pp_flops * 1e-9);
    out += printf_string("pp%d host: %.2f ± %.2f ms per prompt outside the CPU kernels\n", p,
                         r.pp_host_seconds.mean * 1e3, r.pp_host_seconds.stddev * 1e3);
  }
  if (o.n_gen > 0) {
    const int n = o.n_gen;
    if (o.depth > 0) out += printf_string("tg%d: after %d positions in the KV cache\n", n, o.depth);
    out += printf_string("tg%d: %.2f ± %.2f tokens/s\n", n, r.tg_tokens_per_s.mean, r.tg_tokens_per_s.stddev);
    out += printf_string("tg%d: %.2f ± %.2f GB/s = %.3f of the memory read bandwidth (%.2f GB/s); %.2f MB per token\n",
                         n, r.tg_bytes_per_s.mean * 1e-9, r.tg_bytes_per_s.stddev * 1e-9, r.tg_fraction,
                         r.memory_read_bytes_per_s * 1e-9, r.tg_bytes_per_token * 1e-6);
    out +=
        printf_string("tg%d host: %.1f ± %.1f µs/token outside the CPU kernels (%.3f ms/token wall, %.3f in kernels)\n",
                      n, r.tg_host_seconds_per_token.mean * 1e6, r.tg_host_seconds_per_token.stddev * 1e6,
                      r.tg_seconds_per_token.mean * 1e3, r.tg_kernel_seconds_per_token.mean * 1e3);
    if (o.parallel > 1)
      out += printf_string("tg%d x %d sequences: %.2f ± %.2f tokens/s in all = %.2fx one sequence\n", n, o.parallel,
                           r.tg_parallel_tokens_per_s.mean, r.tg_parallel_tokens_per_s.stddev,
                           r.tg_tokens_per_s.mean > 0 ? r.tg_parallel_tokens_per_s.mean / r.tg_tokens_per_s.mean : 0.0);
    if (r.hops > 0)
      out += printf_string(
          "tg%d per hop: %.1f µs/token over %d hops between machines (%.3f ms/token here, %.3f with every layer on "
          "this host)\n",
          n, r.tg_seconds_per_hop * 1e6, r.hops, r.tg_seconds_per_token.mean * 1e3, r.local_tg_seconds_per_token * 1e3);
  }
  if (r.tensor_split) {
    if (o.n_prompt > 0 && r.local_pp_tokens_per_s > 0)
      out += printf_string("pp%d tensor split: %.2f tokens/s, %.2f on this host alone = %.2fx\n", o.n_prompt,
                           r.pp_tokens_per_s.mean, r.local_pp_tokens_per_s,
                           r.pp_tokens_per_s.mean / r.local_pp_tokens_per_s);
    if (o.n_gen > 0 && r.tg_seconds_per_token.mean > 0)
      out += printf_string("tg%d tensor split: %.3f ms/token, %.3f on this host alone = %.2fx\n", o.n_gen,
                           r.tg_seconds_per_token.mean * 1e3, r.local_tg_seconds_per_token * 1e3,
                           r.local_tg_seconds_per_token / r.tg_seconds_per_token.mean);
    out += printf_string(
        "tensor split links: %.1f KB and %.1f round trips per token to and from the workers; this host waited %.3f "
        "ms/token for their partial sums\n",
        r.tp_worker_bytes_per_token / 1e3, r.tp_round_trips_per_token, r.tp_wait_seconds_per_token * 1e3);
  }
  if (r.experts_split) {
    if (o.n_prompt > 0)
      out += printf_string("pp%d experts: %.2f tokens/s overlapped, %.2f serialised = %.2fx\n", o.n_prompt,
                           r.pp_tokens_per_s.mean, r.serial_pp_tokens_per_s,
                           r.serial_pp_tokens_per_s > 0 ? r.pp_tokens_per_s.mean / r.serial_pp_tokens_per_s : 0.0);
    if (o.n_gen > 0) {
      const double saved = r.serial_tg_seconds_per_token - r.tg_seconds_per_token.mean;
      out += printf_string("tg%d experts: %.3f ms/token overlapped, %.3f serialised: %.3f ms (%.0f%%) saved\n", o.n_gen,
                           r.tg_seconds_per_token.mean * 1e3, r.serial_tg_seconds_per_token * 1e3, saved * 1e3,
                           r.serial_tg_seconds_per_token > 0 ? 100.0 * saved / r.serial_tg_seconds_per_token : 0.0);
    }
    out += printf_string(
        "experts rows: %.2f MB to and from the workers with each sent only its tokens' rows, %.2f MB with every row "
        "(%.2fx); pp%d %.2f tokens/s, tg%d %.3f ms/token with every row\n",
        static_cast<double>(r.worker_bytes) / 1e6, static_cast<double>(r.all_rows_worker_bytes) / 1e6,
        r.all_rows_worker_bytes > 0 ? static_cast<double>(r.worker_bytes) / static_cast<double>(r.all_rows_worker_bytes)
                                    : 0.0,
        o.n_prompt, r.all_rows_pp_tokens_per_s, o.n_gen, r.all_rows_tg_seconds_per_token * 1e3);
  }
  return out;
}

std::string format_model_bench_json(const ModelBenchResult& r) {
  const ModelBenchOptions& o = r.options;
  std::string j = "{";
  j += "\"model\": " + json_string(r.model);
  j += ", \"threads\": " + std::to_string(o.n_threads);
  j += ", \"cpu_kernels\": " + json_string(r.cpu_kernels);
  j += ", \"devices\": " + std::to_string(r.devices);
  j += ", \"n_layer\": " + std::to_string(r.n_layer);
  j += ", \"host_layers\": " + std::to_string(r.work.host_layers);
  j += ", \"reps\": " + std::to_string(o.reps);
  j += ", \"limits\": {\"memory_read_gb_per_s\": " + json_number(r.memory_read_bytes_per_s * 1e-9);
  j += ", \"fma_peak_gflop_per_s\": " + json_number(r.fma.flops_per_s * 1e-9);
  j += ", \"fma_isa\": " + json_string(r.fma.isa);
  j += ", \"fma_avx2_gflop_per_s\": " + json_number(r.fma.avx2_flops_per_s * 1e-9);
  j += ", \"fma_avx512_gflop_per_s\": " + json_number(r.fma.avx512_flops_per_s * 1e-9) + "}";
  if (o.n_prompt > 0) {
    j += ", \"pp\": {\"tokens\": " + std::to_string(o.n_prompt);
    j += ", \"tokens_per_s\": " + json_spread(r.pp_tokens_per_s, 1);
    j += ", \"gflop_per_prompt\": " + json_number(r.pp_flops * 1e-9);
    j += ", \"gflop_per_s\": " + json_spread(r.pp_flops_per_s, 1e-9);
    j += ", \"fraction_of_fma_peak\": " + json_number(r.pp_fraction);
    j += ", \"host_ms_per_prompt\": " + json_spread(r.pp_host_seconds, 1e3) + "}";
  }
  if (o.n_gen > 0) {
    j += ", \"tg\": {\"tokens\": " + std::to_string(o.n_gen) + ", \"depth\": " + std::to_string(o.depth);
    j += ", \"tokens_per_s\": " + json_spread(r.tg_tokens_per_s, 1);
    j += ", \"mb_per_token\": " + json_number(r.tg_bytes_per_token * 1e-6);
    j += ", \"gb_per_s\": " + json_spread(r.tg_bytes_per_s, 1e-9);
    j += ", \"fraction_of_memory_bandwidth\": " + json_number(r.tg_fraction);
    j += ", \"ms_per_token\": " + json_spread(r.tg_seconds_per_token, 1e3);
    j += ", \"kernel_ms_per_token\": " + json_spread(r.tg_kernel_seconds_per_token, 1e3);
    j += ", \"host_us_per_token\": " + json_spread(r.tg_host_seconds_per_token, 1e6);
    if (o.parallel > 1) {
      j += ", \"parallel\": " + std::to_string(o.parallel);
      j += ", \"parallel_tokens_per_s\": " + json_spread(r.tg_parallel_tokens_per_s, 1);
    }
    if (r.hops > 0) {
      j += ", \"hops\": " + std::to_string(r.hops);
      j += ", \"local_ms_per_token\": " + json_number(r.local_tg_seconds_per_token * 1e3);
      j += ", \"us_per_hop\": " + json_number(r.tg_seconds_per_hop * 1e6);
    }
    j += "}";
  }
  if (r.tensor_split) {
    j += ", \"tensor_split\": {\"local_pp_tokens_per_s\": " + json_number(r.local_pp_tokens_per_s);
    j += ", \"local_tg_ms_per_token\": " + json_number(r.local_tg_seconds_per_token * 1e3);
    j += ", \"worker_bytes_per_token\": " + json_number(r.tp_worker_bytes_per_token);
    j += ", \"round_trips_per_token\": " + json_number(r.tp_round_trips_per_token);
    j += ", \"wait_ms_per_token\": " + json_number(r.tp_wait_seconds_per_token * 1e3) + "}";
  }
  if (r.experts_split) {
    j += ", \"experts\": {\"pp_tokens_per_s_overlapped\": " + json_number(r.pp_tokens_per_s.mean);
    j += ", \"pp_tokens_per_s_serialised\": " + json_number(r.serial_pp_tokens_per_s);
    j += ", \"tg_ms_per_token_overlapped\": " + json_number(r.tg_seconds_per_token.mean * 1e3);
    j += ", \"tg_ms_per_token_serialised\": " + json_number(r.serial_tg_seconds_per_token * 1e3);
    j += ", \"worker_bytes\": " + std::to_string(r.worker_bytes);
    j += ", \"worker_bytes_every_row\": " + std::to_string(r.all_rows_worker_bytes);
    j += ", \"pp_tokens_per_s_every_row\": " + json_number(r.all_rows_pp_tokens_per_s);
    j += ", \"tg_ms_per_token_every_row\": " + json_number(r.all_rows_tg_seconds_per_token * 1e3) + "}";
  }
  return j + "}\n";
}

}  // namespace weft::bench
