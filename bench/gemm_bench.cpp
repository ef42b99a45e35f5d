#include "gemm_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "fma_peak.h"
#include "gemm.h"
#include "timing.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Shape = std::array<int64_t, 4>;

// One mul_mat: weights a [K, M, a2, a3] of type, activations [K, N, b2, b3].
struct Product {
  std::string name;
  DType type;
  Shape a, b;
  double flops() const { return 2.0 * static_cast<double>(a[0] * a[1]) * static_cast<double>(b[1] * b[2] * b[3]); }
};

void fill(Tensor& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(t.nelements()));
  for (float& v : values) v = dist(rng);
  std::vector<uint8_t> bytes(t.nbytes());
  from_f32(t.type, values.data(), bytes.data(), t.nelements());
  tensor_set(t, bytes.data(), 0, bytes.size());
}

// Seconds per run of the product as a one-node graph on the backend.
double time_backend(Device& device, Backend& backend, const Product& p, double min_seconds) {
  Context ctx;
  Tensor* a = ctx.new_tensor(p.type, p.a);
  Tensor* x = ctx.new_tensor(DType::f32, p.b);
  Tensor* y = ops::mul_mat(ctx, a, x);
  Graph graph;
  graph.expand(y);
  Tensor* const all[] = {a, x, y};
  auto buffer = allocate_tensors(device.default_buffer_type(), all);
  std::mt19937 rng(7);
  fill(*a, rng);
  fill(*x, rng);
  return time_compute(backend, graph, min_seconds);
}

// gemm()'s operands over plain arrays: packed rows, batch bi of b against
// weight matrix bi / r (broadcast over dim 2).
class PlainOperands final : public cpu::GemmOperands {
 public:
  PlainOperands(const uint8_t* a, size_t a_stride, const float* b, float* c, int64_t k, int64_t m, int64_t n,
                int64_t batches, int64_t r)
      : a_(a), a_stride_(a_stride), b_(b), c_(c), k_(k), m_(m), n_(n), batches_(batches), r_(r) {}
  int64_t batches() const override { return batches_; }
  int64_t cols(int64_t) const override { return n_; }
  const uint8_t* a_rows(int64_t bi) const override { return a_ + static_cast<size_t>(bi / r_ * m_) * a_stride_; }
  size_t a_stride() const override { return a_stride_; }
  const uint8_t* b_row(int64_t bi, int64_t j) const override {
    return reinterpret_cast<const uint8_t*>(b_ + (bi * n_ + j) * k_);
  }
  float* c_row(int64_t bi, int64_t j) const override { return c_ + (bi * n_ + j) * m_; }

 private:
  const uint8_t* a_;
  size_t a_stride_;
  const float* b_;
  float* c_;
  int64_t k_, m_, n_, batches_, r_;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
std::unique_ptr<float, FreeDeleter> aligned_floats(int64_t n) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
  return std::unique_ptr<float, FreeDeleter>(static_cast<float*>(std::aligned_alloc(64, bytes)));
}

// Seconds per run of the packed product of p (b broadcast over dim 2 only),
// forced (not through gemm_preferred), on n_threads threads that each
// repeat their share.
double time_packed(const Product& p, int n_threads, double min_seconds) {
  const int64_t k = p.a[0], m = p.a[1], n = p.b[1];
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> af(static_cast<size_t>(k * m * p.a[2]));
  for (float& v : af) v = dist(rng);
  std::vector<uint8_t> a(row_bytes(p.type, k) * static_cast<size_t>(m * p.a[2]));
  from_f32(p.type, af.data(), a.data(), k * m * p.a[2]);
  std::vector<float> b(static_cast<size_t>(k * n * p.b[2])), c(static_cast<size_t>(m * n * p.b[2]));
  for (float& v : b) v = dist(rng);
  const PlainOperands ops(a.data(), row_bytes(p.type, k), b.data(), c.data(), k, m, n, p.b[2], p.b[2] / p.a[2]);
  const cpu::GemmShape shape{p.type, m, k, sizeof(float), n};
  const cpu::GemmKernel& kernel = cpu::gemm_kernel();
  const cpu::GemmBlocking blk = cpu::gemm_blocking(kernel, shape);
  auto run = [&](int reps) {
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (int t = 0; t < n_threads; ++t) {
      threads.emplace_back([&, t] {
        auto a_buf = aligned_floats(blk.mc * blk.kc);
        auto b_buf = aligned_floats(blk.kc * blk.nc);
        const cpu::KernelContext kc{t, n_threads, nullptr, 0};
        for (int r = 0; r < reps; ++r) cpu::gemm_with(kc, kernel, blk, shape, ops, a_buf.get(), b_buf.get());
      });
    }
    for (auto& th : threads) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  return fastest(run, min_seconds);
}

std::string shape_str(const Shape& s) {
  // Appended in place: GCC 12 misreads "," + std::string&& as an
  // overlapping copy (-Wrestrict, GCC bug 105329).
  std::string r = "[";
  r.append(std::to_string(s[0])).append(",").append(std::to_string(s[1]));
  if (s[2] != 1 || s[3] != 1) r.append(",").append(std::to_string(s[2]));
  if (s[3] != 1) r.append(",").append(std::to_string(s[3]));
  return r + "]";
}

Product product(DType t, Shape a, Shape b) {
  return {"mul_mat " + std::string(dtype_name(t)) + " " + shape_str(a) + "x" + shape_str(b), t, a, b};
}

}  // namespace

int run_gemm_bench(const GemmBenchOptions& options) {
  const int n_threads =
      options.n_threads > 0 ? options.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const cpu::GemmKernel& kernel = cpu::gemm_kernel();
  // The peak of the vector width the product's kernel uses, measured before
  // and after the products; the larger counts (a busy machine only lowers
  // either).
  const bool wide = std::string(kernel.name) == "avx512";
  auto peak_now = [&] {
    const FmaPeak p = measure_fma_peak(n_threads);
    return wide ? p.avx512_flops_per_s : p.avx2_flops_per_s;
  };
  const double peak_before = peak_now();

  auto device = make_cpu_device(n_threads);
  auto backend = device->create_backend();
  auto selected = [&](const std::string& name) {
    return options.filter.empty() || name.find(options.filter) != std::string::npos;
  };

  std::vector<Product> prompt;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    prompt.push_back(product(t, {2048, 2048, 1, 1}, {2048, 512, 1, 1}));  // attention projections
    prompt.push_back(product(t, {2048, 5632, 1, 1}, {2048, 512, 1, 1}));  // ffn gate, up
    prompt.push_back(product(t, {5632, 2048, 1, 1}, {5632, 512, 1, 1}));  // ffn down
  }
  // Attention over a 512-position cache (TinyLlama: 32 query heads of 64
  // sharing 4 kv heads, f16 cache as the model stores it): scores (k . q)
  // and values.
  prompt.push_back(product(DType::f16, {64, 512, 4, 1}, {64, 512, 32, 1}));
  prompt.push_back(product(DType::f16, {512, 64, 4, 1}, {512, 512, 32, 1}));
  std::vector<std::pair<const Product*, double>> timed;
  for (const Product& p : prompt)
    if (selected(p.name)) timed.emplace_back(&p, time_backend(*device, *backend, p, options.min_seconds));
  const double peak_after = timed.empty() ? 0.0 : peak_now();
  const double limit = std::max(peak_before, peak_after);

  std::printf("FMA peak (%d threads, %s): %.1f GFLOP/s before the products, %.1f after; of peak = GFLOP/s / %.1f\n",
              n_threads, wide ? "avx512" : "avx2", peak_before * 1e-9, peak_after * 1e-9, limit * 1e-9);
  std::printf(
      "packed product: %s kernel, %dx%d register tile; times: the fastest run (other processes can only "
      "slow a run down)\n",
      kernel.name, kernel.mr, kernel.nr);
  std::printf("\n%-48s %12s %10s %8s\n", "product (a x b, 1B-class, 512 tokens)", "time/run", "GFLOP/s", "of peak");
  for (const auto& [p, s] : timed) {
    std::printf("%-48s %9.1f us %10.1f %8.3f\n", p->name.c_str(), s * 1e6, p->flops() / s * 1e-9,
                p->flops() / s / limit);
  }
  std::fflush(stdout);

  // Where the matrix-vector tile engine hands over to the packed product:
  // the backend's choice (gemm_preferred) beside the packed product forced;
  // ratio > 1 where the packed product is faster.
  std::printf("\n%-48s %8s %12s %12s %8s\n", "crossover (backend's choice vs packed)", "path", "backend", "packed",
              "ratio");
  std::vector<Product> small;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : {1, 4, 16, 32, 48, 64, 96, 128}) small.push_back(product(t, {2048, 2048, 1, 1}, {2048, n, 1, 1}));
  for (int64_t n : {1, 4, 8, 16, 32, 64}) small.push_back(product(DType::f16, {128, 512, 8, 1}, {128, n, 32, 1}));
  for (int64_t n : {1, 4, 8, 16, 32, 64}) small.push_back(product(DType::f16, {512, 128, 8, 1}, {512, n, 32, 1}));
  for (const Product& p : small) {
    if (!selected(p.name)) continue;
    const double sb = time_backend(*device, *backend, p, options.min_seconds);
    const double sp = time_packed(p, n_threads, options.min_seconds);
    const bool packed = cpu::gemm_preferred(p.type, p.a[1], p.a[0], p.b[1]);
    std::printf("%-48s %8s %9.1f us %9.1f us %8.2f\n", p.name.c_str(), packed ? "packed" : "tiles", sb * 1e6, sp * 1e6,
                sb / sp);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace weft::bench
