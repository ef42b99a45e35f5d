// Placement by predicted time per token (include/weft/runtime/placement.h,
// docs/placement.md): the model of time, and the search for the bounds that
// minimise it within each device's free memory.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "placement_links.h"
#include "weft/core/error.h"
#include "weft/runtime/placement.h"

namespace weft {
namespace detail {

bool has_link(const DeviceSpeed& s) {
  return s.latency_seconds > 0 || s.bytes_per_second > 0;
}

double one_link(const DeviceSpeed& s, size_t bytes) {
  return s.latency_seconds + (s.bytes_per_second > 0 ? static_cast<double>(bytes) / s.bytes_per_second : 0.0);
}

double hop(const PlacementInput& in, int from, int to, size_t bytes) {
  if (from == to) return 0;
  if (from == kHost) return one_link(in.speeds[static_cast<size_t>(to)], bytes);
  if (to == kHost) return one_link(in.speeds[static_cast<size_t>(from)], bytes);
  const DeviceSpeed& a = in.speeds[static_cast<size_t>(from)];
  const DeviceSpeed& b = in.speeds[static_cast<size_t>(to)];
  if (!in.peer_links || !has_link(a) || !has_link(b)) return one_link(a, bytes) + one_link(b, bytes);
  // A peer link: measured from neither end; the slower of the two links.
  double bw = a.bytes_per_second > 0 ? a.bytes_per_second : b.bytes_per_second;
  if (b.bytes_per_second > 0) bw = std::min(bw, b.bytes_per_second);
  return std::max(a.latency_seconds, b.latency_seconds) + (bw > 0 ? static_cast<double>(bytes) / bw : 0.0);
}

}  // namespace detail
namespace {

using detail::has_link;
using detail::hop;
using detail::kHost;
using detail::one_link;

constexpr const char* kPlacementSpeedWhere = "placement";
constexpr size_t kTokenBytes = 4;  // what goes to device 0: the token id
constexpr double kInf = std::numeric_limits<double>::infinity();

// "" when predict_time and the search can use in, else what is missing.
std::string missing(const PlacementInput& in) {
  const ModelCosts& c = in.costs;
  if (in.speeds.empty()) return "no device speeds";
  for (const DeviceSpeed& s : in.speeds)
    if (!s.measured() || !std::isfinite(s.seconds_per_byte) || s.latency_seconds < 0 || s.bytes_per_second < 0)
      return "a device without a measured speed";
  if (!c.known()) return "no model costs";
  if (c.layer_bytes.size() != static_cast<size_t>(in.n_layer) || c.layer_read_bytes.size() != c.layer_bytes.size())
    return "model costs for " + std::to_string(c.layer_bytes.size()) + " layers, not " + std::to_string(in.n_layer);
  if (!in.free_bytes.empty() && in.free_bytes.size() != in.speeds.size()) return "free memory not given per device";
  return {};
}

// Sums over layer ranges in O(1).
struct Prefix {
  std::vector<double> read;    // read bytes of layers [0, l)
  std::vector<double> memory;  // memory of layers [0, l)
  explicit Prefix(const ModelCosts& c) : read{0}, memory{0} {
    for (size_t l = 0; l < c.layer_bytes.size(); ++l) {
      read.push_back(read.back() + static_cast<double>(c.layer_read_bytes[l]));
      memory.push_back(memory.back() + static_cast<double>(c.layer_bytes[l]));
    }
  }
};

int output_device(const PlacementInput& in) {
  return in.costs.output_on_first ? 0 : static_cast<int>(in.speeds.size()) - 1;
}

// Layers [a, b) on device d: its compute, without the output product.
double layer_seconds(const PlacementInput& in, const Prefix& p, int d, int64_t a, int64_t b) {
  return in.speeds[static_cast<size_t>(d)].seconds_per_byte *
         (p.read[static_cast<size_t>(b)] - p.read[static_cast<size_t>(a)]);
}

bool fits(const PlacementInput& in, const Prefix& p, int d, int64_t a, int64_t b) {
  const size_t n = in.speeds.size();
  const size_t free = in.free_bytes.empty() ? 0 : in.free_bytes[static_cast<size_t>(d)];
  if (free == 0) return true;  // unknown
  double need = p.memory[static_cast<size_t>(b)] - p.memory[static_cast<size_t>(a)];
  if (d == 0) need += static_cast<double>(in.costs.first_bytes);
  if (static_cast<size_t>(d) == n - 1) need += static_cast<double>(in.costs.last_bytes);
  return need <= static_cast<double>(free);
}

// The device whose bounds hold layer l.
int home_of(std::span<const int64_t> bounds, int64_t l) {
  int d = 0;
  while (bounds[static_cast<size_t>(d) + 1] <= l) ++d;
  return d;
}

// predict_time's expert split (placement.h): moves each layer's expert reads
// from its device to every device in proportion to its count, adds the
// round trips, and what runs at once.
void add_expert_split(TimePrediction& t, std::span<const int64_t> bounds, const PlacementInput& in,
                      std::span<const int64_t> experts) {
  const ModelCosts& c = in.costs;
  const size_t n = in.speeds.size();
  int64_t sum = 0;
  for (int64_t e : experts) sum += e >= 0 ? e : -1;
  if (experts.size() != n || c.n_expert <= 0 || sum != c.n_expert ||
      c.layer_expert_read_bytes.size() != static_cast<size_t>(in.n_layer))
    fail(ErrorKind::invalid_input, kPlacementSpeedWhere,
         "cannot predict an expert split of " + std::to_string(experts.size()) + " counts for " + std::to_string(n) +
             " devices and a model of " + std::to_string(c.n_expert) + " experts");
  std::vector<double> part(n);
  for (int64_t l = 0; l < in.n_layer; ++l) {
    const int h = home_of(bounds, l);
    const double bytes = static_cast<double>(c.layer_expert_read_bytes[static_cast<size_t>(l)]);
    t.compute_seconds[static_cast<size_t>(h)] -= in.speeds[static_cast<size_t>(h)].seconds_per_byte * bytes;
    double parts = 0, longest = 0;
    for (size_t d = 0; d < n; ++d) {
      if (experts[d] == 0) continue;
      const double share = in.speeds[d].seconds_per_byte * bytes * static_cast<double>(experts[d]) /
                           static_cast<double>(c.n_expert);
      t.compute_seconds[d] += share;
      double trip = 0;
      if (static_cast<int>(d) != h) {
        trip = hop(in, h, static_cast<int>(d), c.activation_bytes) + hop(in, static_cast<int>(d), h, c.activation_bytes);
        t.link_seconds[d] += trip;
      }
      parts += share + trip;
      longest = std::max(longest, share + trip);
    }
    t.overlapped_seconds += parts - longest;
  }
}

class SpeedPolicy final : public PlacementPolicy {
 public:
  std::vector<int64_t> layer_bounds(const PlacementInput& in) const override { return place_by_speed(in).bounds; }
  std::string describe() const override { return "by speed"; }
};

}  // namespace

double TimePrediction::total() const {
  double t = return_seconds - overlapped_seconds;
  for (double s : compute_seconds) t += s;
  for (double s : link_seconds) t += s;
  return t;
}

double stage_seconds(const TimePrediction& t) {
  double worst = 0;
  for (size_t d = 0; d < t.compute_seconds.size(); ++d)
    worst = std::max(worst, t.compute_seconds[d] + t.link_seconds[d]);
  return worst;
}

TimePrediction predict_time(std::span<const int64_t> bounds, const PlacementInput& in, std::span<const int64_t> experts) {
  if (const std::string why = missing(in); !why.empty())
    fail(ErrorKind::invalid_input, kPlacementSpeedWhere, "cannot predict the time per token: " + why);
  const size_t n = in.speeds.size();
  if (bounds.size() != n + 1 || bounds.front() != 0 || bounds.back() != in.n_layer)
    fail(ErrorKind::invalid_input, kPlacementSpeedWhere,
         std::to_string(bounds.size()) + " layer bounds for " + std::to_string(n) + " devices");
  for (size_t d = 0; d < n; ++d)
    if (bounds[d] > bounds[d + 1])
      fail(ErrorKind::invalid_input, kPlacementSpeedWhere, "layer bounds decrease at device " + std::to_string(d));
  const Prefix p(in.costs);
  const int o = output_device(in);
  TimePrediction t;
  t.compute_seconds.assign(n, 0.0);
  t.link_seconds.assign(n, 0.0);
  for (size_t d = 0; d < n; ++d)
    t.compute_seconds[d] = layer_seconds(in, p, static_cast<int>(d), bounds[d], bounds[d + 1]);
  t.compute_seconds[static_cast<size_t>(o)] +=
      in.speeds[static_cast<size_t>(o)].seconds_per_byte * static_cast<double>(in.costs.output_read_bytes);
  // The chain: this host, device 0, the devices with layers, the last, the
  // output product's, this host.
  int at = kHost;
  auto visit = [&](int d, size_t bytes) {
    if (d == at) return;
    t.link_seconds[static_cast<size_t>(d)] += hop(in, at, d, bytes);
    at = d;
  };
  visit(0, kTokenBytes);
  for (size_t d = 1; d + 1 < n; ++d)
    if (bounds[d + 1] > bounds[d]) visit(static_cast<int>(d), in.costs.activation_bytes);
  visit(static_cast<int>(n) - 1, in.costs.activation_bytes);
  visit(o, in.costs.activation_bytes);
  t.return_seconds = hop(in, at, kHost, in.costs.logits_bytes);
  if (!experts.empty()) add_expert_split(t, bounds, in, experts);
  return t;
}

SpeedPlacement place_by_speed(const PlacementInput& in) {
  auto by_memory = [&in](std::string why) {
    return SpeedPlacement{split_by_free_memory()->layer_bounds(in), std::move(why)};
  };
  if (const std::string why = missing(in); !why.empty()) return by_memory(why);
  const int n = static_cast<int>(in.speeds.size());
  const int64_t L = in.n_layer;
  const Prefix p(in.costs);
  const size_t width = static_cast<size_t>(L) + 1;
  // f[d][l]: the least time for layers [0, l) on devices 0..d with device d
  // the last that takes part (it holds layers, or is device 0), its hops
  // and compute included; from[d][l] the (device, layer) it continues.
  // Pipelined, the time is the slowest stage so far (a max, not a sum; the
  // output product counted in its stage), which the same recurrence
  // minimises since max, like +, never decreases.
  const int o = output_device(in);
  const double output = in.speeds[static_cast<size_t>(o)].seconds_per_byte * static_cast<double>(in.costs.output_read_bytes);
  auto stage = [&](int d, double link, int64_t a, int64_t b) {
    return link + layer_seconds(in, p, d, a, b) + (in.pipelined && d == o ? output : 0.0);
  };
  auto join = [&](double before, double next) { return in.pipelined ? std::max(before, next) : before + next; };
  std::vector<std::vector<double>> f(static_cast<size_t>(n), std::vector<double>(width, kInf));
  std::vector<std::vector<std::pair<int, int64_t>>> from(static_cast<size_t>(n),
                                                         std::vector<std::pair<int, int64_t>>(width, {-1, 0}));
  for (int64_t l = 0; l <= L; ++l)
    if (fits(in, p, 0, 0, l))
      f[0][static_cast<size_t>(l)] = stage(0, hop(in, kHost, 0, kTokenBytes), 0, l);
  for (int e = 1; e < n; ++e) {
    const bool last = e == n - 1;
    for (int64_t b = last ? L : 1; b <= L; ++b) {
      double& best = f[static_cast<size_t>(e)][static_cast<size_t>(b)];
      for (int d = 0; d < e; ++d) {
        const double link = hop(in, d, e, in.costs.activation_bytes);
        // A device between d and e holds nothing; e holds [a, b), at least
        // one layer unless it is the last device (which always takes part).
        for (int64_t a = 0; a <= (last ? b : b - 1); ++a) {
          const double before = f[static_cast<size_t>(d)][static_cast<size_t>(a)];
          if (before == kInf || !fits(in, p, e, a, b)) continue;
          const double t = join(before, stage(e, link, a, b));
          if (t < best) {
            best = t;
            from[static_cast<size_t>(e)][static_cast<size_t>(b)] = {d, a};
          }
        }
      }
    }
  }
  if (f[static_cast<size_t>(n) - 1][static_cast<size_t>(L)] == kInf)
    return by_memory("no placement fits every device's free memory");
  std::vector<int64_t> bounds(static_cast<size_t>(n) + 1, L);
  bounds[0] = 0;
  for (int e = n - 1; e > 0;) {
    const auto [d, a] = from[static_cast<size_t>(e)][static_cast<size_t>(bounds[static_cast<size_t>(e) + 1])];
    for (int k = d + 1; k <= e; ++k) bounds[static_cast<size_t>(k)] = a;
    e = d;
  }
  return {bounds, {}};
}

std::unique_ptr<PlacementPolicy> split_by_speed() {
  return std::make_unique<SpeedPolicy>();
}

}  // namespace weft
