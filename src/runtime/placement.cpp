// Layer placement policies (include/weft/runtime/placement.h).
#include "weft/runtime/placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "weft/core/error.h"

namespace weft {
namespace {

constexpr const char* kPlacementWhere = "placement";

class WeightsPolicy final : public PlacementPolicy {
 public:
  explicit WeightsPolicy(std::vector<double> w) : w_(std::move(w)) { (void)weft::layer_bounds(w_, 0); }  // validates
  std::vector<int64_t> layer_bounds(const PlacementInput& in) const override {
    if (!in.free_bytes.empty() && in.free_bytes.size() != w_.size())
      fail(ErrorKind::invalid_input, kPlacementWhere,
           "the split has " + std::to_string(w_.size()) + " weights for " + std::to_string(in.free_bytes.size()) +
               " devices");
    return weft::layer_bounds(w_, in.n_layer);
  }
  std::string describe() const override {
    std::string s = "split";
    for (size_t i = 0; i < w_.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%g", i == 0 ? " " : ",", w_[i]);
      s += buf;
    }
    return s;
  }

 private:
  std::vector<double> w_;
};

class FreeMemoryPolicy final : public PlacementPolicy {
 public:
  std::vector<int64_t> layer_bounds(const PlacementInput& in) const override {
    if (in.free_bytes.empty()) fail(ErrorKind::invalid_input, kPlacementWhere, "no devices to place layers on");
    std::vector<double> w;
    double total = 0;
    for (size_t f : in.free_bytes) {
      w.push_back(static_cast<double>(f));
      total += w.back();
    }
    if (!(total > 0)) w.assign(in.free_bytes.size(), 1.0);
    return weft::layer_bounds(w, in.n_layer);
  }
  std::string describe() const override { return "by free memory"; }
};

}  // namespace

std::unique_ptr<PlacementPolicy> split_by_weights(std::vector<double> weights) {
  return std::make_unique<WeightsPolicy>(std::move(weights));
}

std::unique_ptr<PlacementPolicy> split_by_free_memory() {
  return std::make_unique<FreeMemoryPolicy>();
}

std::vector<double> parse_split(const std::string& spec, size_t n_parts, const std::string& flag) {
  std::vector<double> w;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0) || v > 1e18)
      fail(ErrorKind::invalid_input, kPlacementWhere, flag + " '" + spec + "': '" + item + "' is not a weight >= 0");
    w.push_back(v);
    start = comma + 1;
  }
  double total = 0;
  for (double v : w) total += v;
  if (w.size() != n_parts || !(total > 0))
    fail(ErrorKind::invalid_input, kPlacementWhere,
         flag + " '" + spec + "' needs " + std::to_string(n_parts) +
             " weights (one per device, the host first), not all zero");
  return w;
}

std::vector<std::vector<double>> parse_split_groups(const std::string& spec, size_t n_parts, const std::string& flag) {
  std::vector<std::vector<double>> groups;
  size_t count = 0;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t slash = std::min(spec.find('/', start), spec.size());
    const std::string group = spec.substr(start, slash - start);
    const size_t weights = static_cast<size_t>(std::count(group.begin(), group.end(), ',')) + 1;
    groups.push_back(parse_split(group, weights, flag + " '" + spec + "', group '" + group + "'"));
    count += weights;
    start = slash + 1;
  }
  if (count != n_parts)
    fail(ErrorKind::invalid_input, kPlacementWhere,
         flag + " '" + spec + "' has " + std::to_string(count) + " weights for " + std::to_string(n_parts) +
             " devices (one per device, the host first; '/' between groups)");
  return groups;
}

std::vector<int64_t> layer_bounds(const std::vector<double>& w, int64_t n_layer) {
  if (w.empty()) fail(ErrorKind::invalid_input, kPlacementWhere, "no devices to place layers on");
  if (n_layer < 0) fail(ErrorKind::invalid_input, kPlacementWhere, "negative layer count " + std::to_string(n_layer));
  double total = 0;
  for (double v : w) {
    if (!(v >= 0) || !std::isfinite(v))
      fail(ErrorKind::invalid_input, kPlacementWhere, "a layer weight of " + std::to_string(v) + " (finite, >= 0)");
    total += v;
  }
  if (!(total > 0) || !std::isfinite(total))
    fail(ErrorKind::invalid_input, kPlacementWhere, "every layer weight is zero");
  std::vector<int64_t> bounds{0};
  double sum = 0;
  for (double v : w) {
    sum += v;
    const int64_t b = std::llround(static_cast<double>(n_layer) * (sum / total));
    bounds.push_back(std::clamp<int64_t>(b, bounds.back(), n_layer));
  }
  bounds.back() = n_layer;
  return bounds;
}

}  // namespace weft
