#include "ops_bench.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "matvec_bench.h"
#include "memory_bandwidth.h"
#include "rowops_bench.h"
#include "timing.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft::bench {
namespace {

// One benchmark case: a graph of one op and what it moves and computes.
struct OpCase {
  std::string name;
  std::function<Tensor*(Context&)> build;  // returns the op's result
  double flops = 0;                        // per run; 0 when not meaningful
};

struct PreparedCase {
  Context ctx;
  Graph graph;
  std::unique_ptr<Buffer> buffer;
  double bytes = 0;  // bytes the op reads (inputs) plus writes (result)
};

constexpr int64_t kDistinctRows = 64;

void fill_random(Tensor& t, std::mt19937& rng) {
  std::vector<float> values(static_cast<size_t>(t.nelements()));
  if (t.type == DType::i32) {
    std::vector<int32_t> ints(values.size());
    for (auto& v : ints) v = static_cast<int32_t>(rng() % 16);  // valid rows and positions for every case here
    tensor_set(t, ints.data(), 0, ints.size() * sizeof(int32_t));
    return;
  }
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : values) v = dist(rng);
  std::vector<uint8_t> bytes(t.nbytes());
  if (traits(t.type).quantized && t.nrows() > kDistinctRows) {
    // The reference quantizers are slow: quantize kDistinctRows rows, repeat them.
    const size_t row = row_bytes(t.type, t.ne[0]);
    from_f32(t.type, values.data(), bytes.data(), t.ne[0] * kDistinctRows);
    for (size_t at = row * kDistinctRows; at < bytes.size(); at += row)
      std::memcpy(bytes.data() + at, bytes.data() + at % (row * kDistinctRows), row);
  } else {
    from_f32(t.type, values.data(), bytes.data(), t.nelements());
  }
  tensor_set(t, bytes.data(), 0, bytes.size());
}

std::unique_ptr<PreparedCase> prepare(const OpCase& c, Device& dev) {
  auto p = std::make_unique<PreparedCase>();
  Tensor* out = c.build(p->ctx);
  p->graph.expand(out);
  std::vector<Tensor*> all(p->graph.leafs().begin(), p->graph.leafs().end());
  all.insert(all.end(), p->graph.nodes().begin(), p->graph.nodes().end());
  p->buffer = allocate_tensors(dev.default_buffer_type(), all);
  std::mt19937 rng(42);
  for (Tensor* leaf : p->graph.leafs()) {
    fill_random(*leaf, rng);
    p->bytes += static_cast<double>(leaf->nbytes());
  }
  p->bytes += static_cast<double>(out->nbytes());
  return p;
}

// Matrix products: decode- and prompt-sized, for each weight type.
void add_mul_mat_cases(std::vector<OpCase>& cases) {
  const DType weights[] = {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0};
  for (int64_t size : {1024, 4096}) {
    for (DType w : weights) {
      for (int64_t n : {1, 32}) {
        cases.push_back({"mul_mat " + std::string(dtype_name(w)) + " " + std::to_string(size) + "x" +
                             std::to_string(size) + " n=" + std::to_string(n),
                         [=](Context& ctx) {
                           return ops::mul_mat(ctx, ctx.new_tensor(w, {size, size}),
                                               ctx.new_tensor(DType::f32, {size, n}));
                         },
                         2.0 * static_cast<double>(size * size * n)});
      }
    }
  }
  // Prompt-sized products (64 activation rows) for every quantized type.
  for (DType w : {DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K,
                  DType::q6_K, DType::iq4_nl, DType::iq4_xs, DType::mxfp4, DType::q8_0, DType::q4_0}) {
    cases.push_back({"mul_mat " + std::string(dtype_name(w)) + " 4096x4096 n=64",
                     [=](Context& ctx) {
                       return ops::mul_mat(ctx, ctx.new_tensor(w, {4096, 4096}), ctx.new_tensor(DType::f32, {4096, 64}));
                     },
                     2.0 * 4096 * 4096 * 64});
  }
}

// The elementwise and row ops a layer runs, over 64 and 4096 rows of 4096.
void add_row_op_cases(std::vector<OpCase>& cases) {
  for (int64_t rows : {64, 4096}) {
    const std::string shape = "[4096," + std::to_string(rows) + "]";
    const double elems = 4096.0 * static_cast<double>(rows);
    cases.push_back({"add f32 " + shape, [=](Context& ctx) {
                       return ops::add(ctx, ctx.new_tensor(DType::f32, {4096, rows}), ctx.new_tensor(DType::f32, {4096, 1}));
                     }, elems});
    cases.push_back({"silu f32 " + shape, [=](Context& ctx) {
                       return ops::silu(ctx, ctx.new_tensor(DType::f32, {4096, rows}));
                     }, elems});
    cases.push_back({"gelu_erf f32 " + shape, [=](Context& ctx) {
                       return ops::gelu_erf(ctx, ctx.new_tensor(DType::f32, {4096, rows}));
                     }, elems});
    cases.push_back({"sigmoid f32 " + shape, [=](Context& ctx) {
                       return ops::sigmoid(ctx, ctx.new_tensor(DType::f32, {4096, rows}));
                     }, elems});
    cases.push_back({"softcap f32 " + shape, [=](Context& ctx) {
                       return ops::softcap(ctx, ctx.new_tensor(DType::f32, {4096, rows}), 30.0f);
                     }, elems});
    cases.push_back({"rms_norm f32 " + shape, [=](Context& ctx) {
                       return ops::rms_norm(ctx, ctx.new_tensor(DType::f32, {4096, rows}), 1e-5f);
                     }, 3 * elems});
    cases.push_back({"soft_max f32 " + shape, [=](Context& ctx) {
                       return ops::soft_max(ctx, ctx.new_tensor(DType::f32, {4096, rows}), nullptr, 0.125f);
                     }, 4 * elems});
    cases.push_back({"cpy f32->f16 " + shape, [=](Context& ctx) {
                       return ops::cpy(ctx, ctx.new_tensor(DType::f32, {4096, rows}), ctx.new_tensor(DType::f16, {4096, rows}));
                     }, 0});
    cases.push_back({"cpy f32->q8_0 " + shape, [=](Context& ctx) {
                       return ops::cpy(ctx, ctx.new_tensor(DType::f32, {4096, rows}), ctx.new_tensor(DType::q8_0, {4096, rows}));
                     }, 0});
  }
}

// One decode token's attention in a 1 B model's layer (32 query heads of
// 64 over 4 kv heads) after n_kv positions, from a cache laid out as the
// model's (a kv head's rows side by side): 4 flops per head, value and
// position (q . k and p v). At 32768 positions the keys and values (32 MiB
// in f16) outgrow a last-level cache, as a model's layers do together.
// Then rope and get_rows for one and 64 tokens.
void add_attention_cases(std::vector<OpCase>& cases) {
  for (int64_t n_kv : {64, 4096, 32768}) {
    for (DType kv : {DType::f16, DType::q8_0}) {
      cases.push_back({"flash_attn " + std::string(dtype_name(kv)) + " decode kv=" + std::to_string(n_kv),
                       [=](Context& ctx) {
                         return ops::flash_attn(ctx, ctx.new_tensor(DType::f32, {64, 1, 32}),
                                                ctx.new_tensor(kv, {64, n_kv, 4}), ctx.new_tensor(kv, {64, n_kv, 4}),
                                                nullptr, 0.125f);
                       },
                       4.0 * 64 * 32 * static_cast<double>(n_kv)});
    }
  }
  for (int64_t tokens : {1, 64}) {
    cases.push_back({"rope f32 [128,32," + std::to_string(tokens) + "]", [=](Context& ctx) {
                       return ops::rope(ctx, ctx.new_tensor(DType::f32, {128, 32, tokens}),
                                        ctx.new_tensor(DType::i32, {tokens}), 128, RopeMode::normal, 10000.0f);
                     }, 6.0 * 128 * 32 * static_cast<double>(tokens)});
    cases.push_back({"get_rows q8_0 [4096,16]<-" + std::to_string(tokens), [=](Context& ctx) {
                       return ops::get_rows(ctx, ctx.new_tensor(DType::q8_0, {4096, 16}),
                                            ctx.new_tensor(DType::i32, {tokens}));
                     }, 0});
  }
}

std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  add_mul_mat_cases(cases);
  add_row_op_cases(cases);
  add_attention_cases(cases);
  return cases;
}

// One row: time per run, GFLOP/s, GB/s, and GB/s as a fraction of the read
// bandwidth.
void print_row(const std::string& name, double seconds, double flops, double bytes, double read_bw) {
  const double flops_rate = flops / seconds;
  std::printf("%-40s %10.1f us %10s %10.2f %10.3f\n", name.c_str(), seconds * 1e6,
              flops > 0 ? std::to_string(flops_rate / 1e9).substr(0, 7).c_str() : "-", bytes / seconds / 1e9,
              bytes / read_bw / seconds);
}

}  // namespace

int run_ops_bench(const OpsBenchOptions& options) {
  const int n_threads = options.n_threads > 0 ? options.n_threads
                                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const Bandwidth bw = measure_memory_bandwidth(n_threads);
  std::printf("memory bandwidth (%d threads): read %.2f GB/s, copy %.2f GB/s\n", n_threads,
              bw.read_bytes_per_s / 1e9, bw.copy_bytes_per_s / 1e9);
  std::printf("bw_ratio = the op's bytes moved per second / read bandwidth (1.0 = memory-bound limit)\n\n");

  auto device = make_cpu_device(n_threads);
  auto backend = device->create_backend();
  bool header = false;
  for (const OpCase& c : op_cases()) {
    if (!options.filter.empty() && c.name.find(options.filter) == std::string::npos) continue;
    if (!header) std::printf("%-40s %12s %10s %10s %10s\n", "op", "time/run", "GFLOP/s", "GB/s", "of bw");
    header = true;
    const std::unique_ptr<PreparedCase> p = prepare(c, *device);
    print_row(c.name, time_compute(*backend, p->graph, options.min_seconds), c.flops, p->bytes, bw.read_bytes_per_s);
  }
  run_matvec_rows(n_threads, bw.read_bytes_per_s, options.min_seconds, options.filter);
  run_rowop_rows(n_threads, bw.read_bytes_per_s, options.min_seconds, options.filter);
  return 0;
}

}  // namespace weft::bench
