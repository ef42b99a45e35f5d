#include "rowops_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "cache_info.h"
#include "timing.h"
#include "weft/backend/cpu.h"
#include "weft/core/ops.h"

namespace weft::bench {
namespace {

constexpr int64_t kCols = 4096;  // ne0 of every row op here: a 7B-class hidden size

struct RowOp {
  std::string name;  // without the shape
  // Builds the op over rows rows of kCols (rope: over the same number of
  // elements as [128, 32, tokens]).
  std::function<Tensor*(Context&, int64_t rows)> build;
  double flops_per_element = 0;  // 0: not shown
  bool heads = false;            // shown as [128,32,tokens] rather than [kCols,rows]
};

std::vector<RowOp> row_ops() {
  auto f32 = [](Context& ctx, int64_t rows) { return ctx.new_tensor(DType::f32, {kCols, rows}); };
  std::vector<RowOp> v = {
      {"add f32 (row broadcast)",
       [=](Context& c, int64_t r) {
         return ops::add(c, f32(c, r), c.new_tensor(DType::f32, {kCols, 1}));
       },
       1},
      {"mul f32 (same shape)", [=](Context& c, int64_t r) { return ops::mul(c, f32(c, r), f32(c, r)); }, 1},
      {"scale f32", [=](Context& c, int64_t r) { return ops::scale(c, f32(c, r), 0.5f); }, 1},
      {"silu f32", [=](Context& c, int64_t r) { return ops::silu(c, f32(c, r)); }, 1},
      {"silu f16",
       [=](Context& c, int64_t r) {
         return ops::silu(c, c.new_tensor(DType::f16, {kCols, r}));
       },
       1},
      {"gelu f32", [=](Context& c, int64_t r) { return ops::gelu(c, f32(c, r)); }, 1},
      {"gelu_erf f32", [=](Context& c, int64_t r) { return ops::gelu_erf(c, f32(c, r)); }, 1},
      {"sigmoid f32", [=](Context& c, int64_t r) { return ops::sigmoid(c, f32(c, r)); }, 1},
      {"softcap f32", [=](Context& c, int64_t r) { return ops::softcap(c, f32(c, r), 30.0f); }, 1},
      {"swiglu f32", [=](Context& c, int64_t r) { return ops::swiglu(c, f32(c, r), f32(c, r)); }, 1},
      {"rms_norm f32", [=](Context& c, int64_t r) { return ops::rms_norm(c, f32(c, r), 1e-5f); }, 3},
      {"norm f32", [=](Context& c, int64_t r) { return ops::norm(c, f32(c, r), 1e-5f); }, 4},
      {"soft_max f32", [=](Context& c, int64_t r) { return ops::soft_max(c, f32(c, r), nullptr, 0.125f); }, 4},
      // Attention-shaped: 64 query rows per head, one f16 mask shared by the heads.
      {"soft_max f32 mask f16",
       [=](Context& c, int64_t r) {
         return ops::soft_max(c, c.new_tensor(DType::f32, {kCols, 64, r / 64}), c.new_tensor(DType::f16, {kCols, 64}),
                              0.125f);
       },
       5},
      {"rope f32",
       [](Context& c, int64_t r) {
         const int64_t tokens = r * kCols / (128 * 32);
         return ops::rope(c, c.new_tensor(DType::f32, {128, 32, tokens}), c.new_tensor(DType::i32, {tokens}), 128,
                          RopeMode::normal, 10000.0f);
       },
       6, true},
      {"rope neox f32",
       [](Context& c, int64_t r) {
         const int64_t tokens = r * kCols / (128 * 32);
         return ops::rope(c, c.new_tensor(DType::f32, {128, 32, tokens}), c.new_tensor(DType::i32, {tokens}), 128,
                          RopeMode::neox, 10000.0f);
       },
       6, true},
      {"get_rows f16 (permuted rows)",
       [](Context& c, int64_t r) {
         return ops::get_rows(c, c.new_tensor(DType::f16, {kCols, r}), c.new_tensor(DType::i32, {r}));
       },
       0},
  };
  for (const auto& [from, to] : {std::pair{DType::f32, DType::f16}, std::pair{DType::f16, DType::f32},
                                 std::pair{DType::f32, DType::bf16}, std::pair{DType::bf16, DType::f32}}) {
    v.push_back({"cpy " + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)),
                 [from, to](Context& c, int64_t r) {
                   return ops::cpy(c, c.new_tensor(from, {kCols, r}), c.new_tensor(to, {kCols, r}));
                 },
                 0});
  }
  return v;
}

// Values: a 1 MiB block of uniform [-1, 1) values repeated (filling hundreds
// of MiB one random value at a time would take longer than the runs);
// integers (rope positions, get_rows indices) spread over the range.
void fill(Tensor& t, std::mt19937& rng) {
  if (t.type == DType::i32) {
    const int64_t n = t.nelements();
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7919 % n);
    tensor_set(t, v.data(), 0, v.size() * sizeof(int32_t));
    return;
  }
  const int64_t block = std::min<int64_t>(t.nelements(), 1 << 18);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(block));
  for (float& f : values) f = dist(rng);
  const size_t unit = traits(t.type).unit_bytes;
  std::vector<uint8_t> bytes(static_cast<size_t>(block) * unit);
  from_f32(t.type, values.data(), bytes.data(), block);
  for (size_t at = 0; at < t.nbytes(); at += bytes.size())
    tensor_set(t, bytes.data(), at, std::min(bytes.size(), t.nbytes() - at));
}

std::string full_name(const RowOp& op, int64_t rows) {
  if (op.heads) return op.name + " [128,32," + std::to_string(rows * kCols / (128 * 32)) + "]";
  return op.name + " [" + std::to_string(kCols) + "," + std::to_string(rows) + "]";
}

void run_one(const RowOp& op, int64_t rows, Device& device, Backend& backend, double read_bw, double min_seconds) {
  Context ctx;
  Tensor* out = op.build(ctx, rows);
  Graph graph;
  graph.expand(out);
  std::vector<Tensor*> all(graph.leafs().begin(), graph.leafs().end());
  all.insert(all.end(), graph.nodes().begin(), graph.nodes().end());
  auto buffer = allocate_tensors(device.default_buffer_type(), all);
  std::mt19937 rng(7);
  double bytes = static_cast<double>(out->nbytes());
  for (Tensor* leaf : graph.leafs()) {
    fill(*leaf, rng);
    bytes += static_cast<double>(leaf->nbytes());
  }
  if (out->op == Op::cpy) bytes -= static_cast<double>(out->nbytes());  // the destination leaf is the result

  const double per_run = time_compute(backend, graph, min_seconds);
  const double elements = static_cast<double>(kCols) * static_cast<double>(rows);
  char flops[16] = "-";
  if (op.flops_per_element > 0)
    std::snprintf(flops, sizeof flops, "%.3f", op.flops_per_element * elements / per_run / 1e9);
  std::printf("%-40s %10.1f us %10s %10.2f %10.3f\n", full_name(op, rows).c_str(), per_run * 1e6, flops,
              bytes / per_run / 1e9, bytes / per_run / read_bw);
  std::fflush(stdout);
}

}  // namespace

void run_rowop_rows(int n_threads, double read_bytes_per_s, double min_seconds, const std::string& filter) {
  // Each f32 operand about twice the last-level cache (at least 256 MiB).
  const size_t target = beyond_cache_bytes(size_t{256} << 20, 2.0);
  const int64_t rows = static_cast<int64_t>(target / (kCols * sizeof(float))) / 64 * 64;
  std::vector<RowOp> todo;
  for (RowOp& op : row_ops())
    if (filter.empty() || full_name(op, rows).find(filter) != std::string::npos) todo.push_back(std::move(op));
  if (todo.empty()) return;
  auto device = make_cpu_device(n_threads);
  auto backend = device->create_backend();
  std::printf("\nelementwise and row ops over %.0f MiB f32 operands (last-level cache %.0f MiB)\n",
              static_cast<double>(rows * kCols * 4) / (1 << 20),
              static_cast<double>(last_level_cache_bytes()) / (1 << 20));
  for (const RowOp& op : todo) run_one(op, rows, *device, *backend, read_bytes_per_s, min_seconds);
}

}  // namespace weft::bench
