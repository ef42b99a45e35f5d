// The model of time for a tensor split (include/weft/runtime/placement.h,
// docs/placement.md "Tensor parallelism").
#include <algorithm>
#include <string>

#include "weft/core/error.h"
#include "weft/runtime/placement.h"

namespace weft {
namespace {

// One way over a device's link to this host (0 for this host's own CPU).
double one_way(const DeviceSpeed& s, size_t bytes) {
  return s.latency_seconds + (s.bytes_per_second > 0 ? static_cast<double>(bytes) / s.bytes_per_second : 0.0);
}

}  // namespace

TimePrediction predict_tensor_time(std::span<const int64_t> heads, int64_t n_head, const PlacementInput& in) {
  const size_t n = in.speeds.size();
  const ModelCosts& c = in.costs;
  if (n == 0 || heads.size() != n + 1 || heads.front() != 0 || heads.back() != n_head || !c.known() ||
      c.layer_read_bytes.size() != static_cast<size_t>(in.n_layer))
    fail(ErrorKind::invalid_input, "placement",
         "cannot predict a tensor split: " + std::to_string(heads.size()) + " head bounds for " + std::to_string(n) +
             " measured devices, or no model costs");
  double read = 0;
  for (size_t b : c.layer_read_bytes) read += static_cast<double>(b);
  TimePrediction t;
  t.compute_seconds.assign(n, 0.0);
  t.link_seconds.assign(n, 0.0);
  // The layers: each device its share of every layer's reads; a worker
  // two exchanges with this host per layer (the normalized input out and
  // the partial sum back, each way once). All devices work at once.
  double slowest = 0, sum = 0;
  for (size_t d = 0; d < n; ++d) {
    const double share = static_cast<double>(heads[d + 1] - heads[d]) / static_cast<double>(n_head);
    t.compute_seconds[d] = read * share * in.speeds[d].seconds_per_byte;
    t.link_seconds[d] = static_cast<double>(in.n_layer) * 2.0 * 2.0 * one_way(in.speeds[d], c.activation_bytes);
    if (in.speeds[d].latency_seconds == 0 && in.speeds[d].bytes_per_second == 0) t.link_seconds[d] = 0;
    slowest = std::max(slowest, t.compute_seconds[d] + t.link_seconds[d]);
    sum += t.compute_seconds[d] + t.link_seconds[d];
  }
  t.overlapped_seconds = sum - slowest;
  // Then the output product, cut by vocabulary rows as the heads are
  // (each device its share of the output matrix) after the last layer's
  // sum, again all at once: each worker is sent the normed row and sends
  // its logits back.
  double out_slowest = 0, out_sum = 0;
  t.return_seconds = 0;
  for (size_t d = 0; d < n; ++d) {
    const double share = static_cast<double>(heads[d + 1] - heads[d]) / static_cast<double>(n_head);
    double spent = static_cast<double>(c.output_read_bytes) * share * in.speeds[d].seconds_per_byte;
    t.compute_seconds[d] += spent;
    if (in.speeds[d].latency_seconds != 0 || in.speeds[d].bytes_per_second != 0) {  // a worker
      t.link_seconds[d] += one_way(in.speeds[d], c.activation_bytes);
      spent += one_way(in.speeds[d], c.activation_bytes);
      const auto slice = static_cast<size_t>(static_cast<double>(c.logits_bytes) * share);
      t.return_seconds = std::max(t.return_seconds, one_way(in.speeds[d], slice));
    }
    out_slowest = std::max(out_slowest, spent);
    out_sum += spent;
  }
  t.overlapped_seconds += out_sum - out_slowest;
  return t;
}

}  // namespace weft
