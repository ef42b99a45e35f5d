#include "matvec_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "cache_info.h"
#include "timing.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft::bench {
namespace {

constexpr int64_t kCols = 4096;        // K: a 7B-class hidden size
constexpr int64_t kDistinctRows = 64;  // quantized once, then repeated

constexpr DType kTypes[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                            DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K,
                            DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs, DType::mxfp4};

// Fills a [kCols, rows] weight matrix: kDistinctRows rows quantized from
// uniform values, repeated (quantizing hundreds of MiB with the reference
// quantizer would take minutes and measure nothing more).
void fill_weights(Tensor& a, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(kCols * kDistinctRows));
  for (float& v : values) v = dist(rng);
  const size_t row = row_bytes(a.type, kCols);
  std::vector<uint8_t> chunk(row * kDistinctRows);
  from_f32(a.type, values.data(), chunk.data(), kCols * kDistinctRows);
  for (int64_t r = 0; r < a.ne[1]; r += kDistinctRows) {
    const int64_t n = std::min(kDistinctRows, a.ne[1] - r);
    tensor_set(a, chunk.data(), static_cast<size_t>(r) * row, static_cast<size_t>(n) * row);
  }
}

// Seconds per run of a graph of `products` matrix-vector products, each of
// the same [kCols, rows] weights and vector (so that weights small enough
// stay in cache from one product to the next); *weight_bytes gets the
// weights' size.
double time_products(DType type, int64_t rows, int products, Device& device, Backend& backend, double min_seconds,
                     size_t* weight_bytes) {
  Context ctx;
  Tensor* a = ctx.new_tensor(type, {kCols, rows});
  Tensor* x = ctx.new_tensor(DType::f32, {kCols, 1});
  Graph graph;
  std::vector<Tensor*> all = {a, x};
  for (int i = 0; i < products; ++i) {
    Tensor* y = ops::mul_mat(ctx, a, x);
    graph.expand(y);
    all.push_back(y);
  }
  auto buffer = allocate_tensors(device.default_buffer_type(), all);
  std::mt19937 rng(7);
  fill_weights(*a, rng);
  std::vector<float> xv(static_cast<size_t>(kCols));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : xv) v = dist(rng);
  tensor_set(*x, xv.data(), 0, xv.size() * sizeof(float));
  *weight_bytes = a->nbytes();
  return time_compute(backend, graph, min_seconds);
}

void print_row(const char* name, double seconds, double flops, double bytes, double read_bw) {
  std::printf("%-40s %10.1f us %10.2f %10.2f %10.3f\n", name, seconds * 1e6, flops / seconds / 1e9,
              bytes / seconds / 1e9, bytes / seconds / read_bw);
  std::fflush(stdout);
}

// From memory: weights twice the last-level cache, one product per run.
void run_from_memory(DType type, Device& device, Backend& backend, double read_bw, double min_seconds) {
  const size_t target = beyond_cache_bytes(size_t{256} << 20, 2.0);
  const size_t row = row_bytes(type, kCols);
  const int64_t rows =
      static_cast<int64_t>((target + row - 1) / row + kDistinctRows - 1) / kDistinctRows * kDistinctRows;
  size_t weights = 0;
  const double seconds = time_products(type, rows, 1, device, backend, min_seconds, &weights);
  const double bytes = static_cast<double>(weights + static_cast<size_t>(kCols + rows) * sizeof(float));  // a, x, y
  char name[96];
  std::snprintf(name, sizeof name, "matvec %s [%lld,%lld] %.0f MiB", std::string(dtype_name(type)).c_str(),
                static_cast<long long>(kCols), static_cast<long long>(rows), static_cast<double>(weights) / (1 << 20));
  print_row(name, seconds, 2.0 * static_cast<double>(kCols * rows), bytes, read_bw);
}

// From each core's L2: the same kernel with half of L2 of weights per
// thread, read 16 times per run. Its GB/s is the kernel's own speed; where
// that is not well above the read bandwidth, the kernel, not the memory,
// bounds decode.
void run_from_l2(DType type, int n_threads, Device& device, Backend& backend, double read_bw, double min_seconds) {
  constexpr int kProducts = 16;
  const size_t row = row_bytes(type, kCols);
  const int64_t fit = static_cast<int64_t>(level2_cache_bytes() / 2 * static_cast<size_t>(n_threads) / row);
  const int64_t rows = std::max<int64_t>(8, fit / 8 * 8);
  size_t weights = 0;
  const double seconds = time_products(type, rows, kProducts, device, backend, min_seconds, &weights);
  char name[96];
  std::snprintf(name, sizeof name, "matvec %s in L2 [%lld,%lld] %.0f KiB", std::string(dtype_name(type)).c_str(),
                static_cast<long long>(kCols), static_cast<long long>(rows), static_cast<double>(weights) / 1024);
  print_row(name, seconds, 2.0 * kProducts * static_cast<double>(kCols * rows),
            kProducts * static_cast<double>(weights), read_bw);
}

}  // namespace

void run_matvec_rows(int n_threads, double read_bytes_per_s, double min_seconds, const std::string& filter) {
  auto device = make_cpu_device(n_threads);
  auto backend = device->create_backend();
  std::printf(
      "\nmatrix-vector products over %.0f+ MiB of weights (last-level cache %.0f MiB): the decode path;\n"
      "each type again with its weights in L2 (%.0f KiB per core), the kernel's own speed\n",
      static_cast<double>(beyond_cache_bytes(size_t{256} << 20, 2.0)) / (1 << 20),
      static_cast<double>(last_level_cache_bytes()) / (1 << 20), static_cast<double>(level2_cache_bytes()) / 1024);
  for (DType t : kTypes) {
    const std::string name = "matvec " + std::string(dtype_name(t));
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    run_from_memory(t, *device, *backend, read_bytes_per_s, min_seconds);
    run_from_l2(t, n_threads, *device, *backend, read_bytes_per_s, min_seconds);
  }
}

}  // namespace weft::bench
