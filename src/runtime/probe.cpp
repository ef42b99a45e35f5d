// The device probe (include/weft/runtime/probe.h).
#include "weft/runtime/probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "weft/core/context.h"
#include "weft/core/error.h"
#include "weft/core/graph.h"
#include "weft/core/ops.h"
#include "weft/runtime/session.h"

namespace weft {
namespace {

constexpr const char* kProbeWhere = "probe";
constexpr int kMaxRoundTrips = 5;
constexpr int kMaxComputes = 8;  // products in one timed batch
constexpr int kBatches = 3;      // timed batches of products, at least; the fastest kept
constexpr int kMaxBatches = 10;  // and at most, while the budget lasts
constexpr int kUploads = 2;      // timed uploads, the fastest kept
constexpr size_t kMinWeightBytes = size_t{256} << 10;
// Bytes of the fill: 0x3c3c3c3c is 0.0115 as f32, 0x3c3c is 1.06 as f16, a
// block scale of 1.06 for the block types: normal numbers whose products
// stay normal (a subnormal would time the slow path).
constexpr uint8_t kFill = 0x3c;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds a call takes.
template <typename F>
double timed(F&& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

// Time left after the round trip, never below a tenth of the whole (a
// round trip measured longer than this one must not make it zero).
double minus_round_trip(double seconds, double round_trip) {
  return std::max(seconds - round_trip, seconds / 10);
}

// Bytes that no tensor cache holds: a fresh xorshift stream each probe.
std::vector<uint8_t> fresh_bytes(size_t n) {
  uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x >> 32);
  }
  return out;
}

// The product y = W x, W [row_length, rows] of type, as big as allowed.
struct Product {
  Context ctx;
  Tensor* w = nullptr;
  Tensor* y = nullptr;
  Graph graph;
};

std::unique_ptr<Product> build(const Device& device, DType type, int64_t row_length, size_t bytes) {
  if (row_length <= 0 || row_length % traits(type).block_size != 0) return nullptr;
  auto p = std::make_unique<Product>();
  const int64_t rows = static_cast<int64_t>(std::max<size_t>(1, bytes / row_bytes(type, row_length)));
  p->w = p->ctx.new_tensor(type, {row_length, rows});
  Tensor* x = p->ctx.new_tensor(DType::f32, {row_length, 1});
  p->y = ops::mul_mat(p->ctx, p->w, x);
  if (!device.supports_op(*p->y)) return nullptr;
  p->graph.expand(p->y);
  return p;
}

// Round trips: synchronizes with nothing queued, kMaxRoundTrips at most
// (2 at least) within the budget.
struct RoundTrips {
  double least = 0;   // what timed commands subtract: never more than their own round trip
  double median = 0;  // what a hop costs, its wake-ups and jitter included
};
RoundTrips round_trips(Backend& backend, double budget) {
  std::vector<double> rt;
  double spent = 0;
  while (static_cast<int>(rt.size()) < kMaxRoundTrips && (rt.size() < 2 || spent < budget)) {
    rt.push_back(timed([&] { backend.synchronize(); }));
    spent += rt.back();
  }
  std::sort(rt.begin(), rt.end());
  return {rt.front(), rt[rt.size() / 2]};
}

// Host-to-device bytes per second: one upload piece, then the fastest of
// kUploads uploads of as many pieces as the first says fit the budget.
double bandwidth(Backend& backend, Tensor& t, double rtt, const ProbeOptions& o) {
  const size_t chunk = std::clamp<size_t>(o.upload_chunk, 1, t.nbytes());
  const std::vector<uint8_t> bytes = fresh_bytes(std::min(t.nbytes(), std::max(o.upload_bytes, chunk)));
  auto upload = [&](size_t n) {
    return timed([&] {
      for (size_t off = 0; off < n; off += chunk) tensor_set(t, bytes.data() + off, off, std::min(chunk, n - off));
      backend.synchronize();
    });
  };
  const double first = chunk / minus_round_trip(upload(chunk), rtt);
  const auto fit = static_cast<size_t>(std::min(first * o.seconds / kUploads, static_cast<double>(bytes.size())));
  const size_t n = std::max(chunk, fit / chunk * chunk);
  double best = 0;
  for (int i = 0; i < kUploads; ++i) best = std::max(best, static_cast<double>(n) / minus_round_trip(upload(n), rtt));
  return best;
}

// Seconds per run of g: one to warm up (threads, pages, a worker's graph
// cache), then the fastest of batches of runs (kBatches at least, more while
// the budget lasts; the fastest is the one least disturbed by whatever else
// the machine runs), each batch queued together: one round trip each.
double compute_seconds(Backend& backend, const Graph& g, double rtt, double budget) {
  auto batch = [&](int k) {
    const double t = timed([&] {
      for (int i = 0; i < k; ++i) backend.compute(g);
      backend.synchronize();
    });
    return minus_round_trip(t, rtt) / k;
  };
  const double once = batch(1);
  const int k = static_cast<int>(std::clamp(budget / kBatches / once, 1.0, static_cast<double>(kMaxComputes)));
  double best = std::numeric_limits<double>::infinity();
  const double start = now_seconds();
  for (int i = 0; i < kMaxBatches && (i < kBatches || now_seconds() - start < budget); ++i)
    best = std::min(best, batch(k));
  return best;
}

}  // namespace

DeviceSpeed probe_device(Device& device, const ProbeOptions& o) {
  const std::string name = device.name();
  const bool remote = device.kind() == DeviceKind::remote;
  std::unique_ptr<Backend> backend = device.create_backend();
  DeviceSpeed s;
  double rtt = 0;
  if (remote) {
    const RoundTrips r = round_trips(*backend, o.seconds);
    rtt = r.least;
    s.latency_seconds = r.median / 2;
  }
  const size_t free = device.memory().free;
  const size_t bytes = free > 0 ? std::min(o.weight_bytes, free / 4) : o.weight_bytes;
  if (bytes < kMinWeightBytes)
    fail(ErrorKind::out_of_memory, kProbeWhere,
         name + " reports " + format_bytes(free) + " free: too little to measure its speed");
  std::unique_ptr<Product> p = build(device, o.weight_type, o.row_length, bytes);
  if (!p) p = build(device, DType::f32, o.row_length, bytes);
  if (!p)
    fail(ErrorKind::unsupported, kProbeWhere,
         name + " runs no matrix-vector product of rows of " + std::to_string(o.row_length) + " (" +
             std::string(dtype_name(o.weight_type)) + " or f32)");
  std::vector<Tensor*> tensors;
  for (Tensor& t : p->ctx.tensors()) tensors.push_back(&t);
  const std::unique_ptr<Buffer> buf = allocate_tensors(device.default_buffer_type(), tensors);
  if (remote) s.bytes_per_second = bandwidth(*backend, *p->w, rtt, o);
  buf->clear(kFill);
  s.seconds_per_byte = compute_seconds(*backend, p->graph, rtt, o.seconds) / static_cast<double>(p->w->nbytes());
  if (!(s.seconds_per_byte > 0) || !std::isfinite(s.seconds_per_byte))
    fail(ErrorKind::internal, kProbeWhere, name + ": measured " + std::to_string(s.seconds_per_byte) + " s per byte");
  return s;
}

}  // namespace weft
