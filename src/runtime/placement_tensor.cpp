// The model of time for a tensor split (include/weft/runtime/placement.h,
// docs/placement.md "Tensor parallelism").
#include <algorithm>
#include <string>

#include "placement_links.h"
#include "weft/core/error.h"
#include "weft/runtime/placement.h"

namespace weft {
namespace {

using detail::has_link;
using detail::one_link;

// The link time of one of a layer's sums for device d: a worker is sent the
// normalized input and its partial goes back, to this host or, when the
// workers' partials meet on the first worker (meet_on, ModelLayout::
// partials_meet), over the peer link to it, which adds them and sends
// this host the one sum.
double sum_link_seconds(const PlacementInput& in, size_t d, int meet_on, size_t bytes) {
  const DeviceSpeed& s = in.speeds[d];
  if (!has_link(s)) return 0;
  if (meet_on < 0 || static_cast<int>(d) == meet_on) return 2.0 * one_link(s, bytes);
  return one_link(s, bytes) + detail::hop(in, static_cast<int>(d), meet_on, bytes) +
         one_link(in.speeds[static_cast<size_t>(meet_on)], bytes);
}

// The worker the partials meet on, or -1: with peer links, two workers or
// more, and this host's device first (the home).
int meeting_device(const PlacementInput& in) {
  if (!in.peer_links || in.speeds.empty() || has_link(in.speeds.front())) return -1;
  int first = -1, workers = 0;
  for (size_t d = 0; d < in.speeds.size(); ++d) {
    if (!has_link(in.speeds[d])) continue;
    if (first < 0) first = static_cast<int>(d);
    ++workers;
  }
  return workers >= 2 ? first : -1;
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
  // two sums per layer, each an exchange (sum_link_seconds). All devices
  // work at once.
  const int meet_on = meeting_device(in);
  double slowest = 0, sum = 0;
  for (size_t d = 0; d < n; ++d) {
    const double share = static_cast<double>(heads[d + 1] - heads[d]) / static_cast<double>(n_head);
    t.compute_seconds[d] = read * share * in.speeds[d].seconds_per_byte;
    t.link_seconds[d] = static_cast<double>(in.n_layer) * 2.0 * sum_link_seconds(in, d, meet_on, c.activation_bytes);
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
    if (has_link(in.speeds[d])) {  // a worker
      t.link_seconds[d] += one_link(in.speeds[d], c.activation_bytes);
      spent += one_link(in.speeds[d], c.activation_bytes);
      const auto slice = static_cast<size_t>(static_cast<double>(c.logits_bytes) * share);
      t.return_seconds = std::max(t.return_seconds, one_link(in.speeds[d], slice));
    }
    out_slowest = std::max(out_slowest, spent);
    out_sum += spent;
  }
  t.overlapped_seconds += out_sum - out_slowest;
  return t;
}

}  // namespace weft
