// Which layers of a model each device holds. A policy turns what it knows of
// the devices into layer boundaries; the Session checks the result fits.
//
//   auto policy = weft::split_by_weights(weft::parse_split("1,2", 2));
//   std::vector<int64_t> b = policy->layer_bounds({.n_layer = 32, .free_bytes = {..}});
//   // device i holds layers [b[i], b[i+1])
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft {

// What a policy may base its choice on.
struct PlacementInput {
  int64_t n_layer = 0;
  std::vector<size_t> free_bytes;  // one per device, in device order; 0: unknown
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // n_devices + 1 nondecreasing boundaries from 0 to n_layer (a device may
  // get no layers). Throws Error(invalid_input) when it cannot place.
  virtual std::vector<int64_t> layer_bounds(const PlacementInput& in) const = 0;
  // For plans and messages: "split 1,2,1", "by free memory".
  virtual std::string describe() const = 0;
};

// Layers in proportion to weights (one per device, as `--split a,b,c`).
std::unique_ptr<PlacementPolicy> split_by_weights(std::vector<double> weights);
// Layers in proportion to each device's free memory; equal shares when no
// device reports any. The default.
std::unique_ptr<PlacementPolicy> split_by_free_memory();

// "a,b,c" -> n_parts weights, each finite and >= 0, not all zero. Throws
// Error(invalid_input) naming the spec.
std::vector<double> parse_split(const std::string& spec, size_t n_parts);

// n_parts + 1 boundaries: part i holds layers [bounds[i], bounds[i+1]), in
// proportion to w (cumulative shares rounded to the nearest layer; the last
// boundary is n_layer). Throws Error(invalid_input) for no parts, a negative
// or non-finite weight, or all zero.
std::vector<int64_t> layer_bounds(const std::vector<double>& w, int64_t n_layer);

}  // namespace weft
