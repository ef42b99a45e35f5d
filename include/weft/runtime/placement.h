// Which layers of a model each device holds. A policy turns what it knows of
// the devices into layer boundaries; the Session checks the result fits.
//
//   auto policy = weft::split_by_weights(weft::parse_split("1,2", 2));
//   std::vector<int64_t> b = policy->layer_bounds({.n_layer = 32, .free_bytes = {..}});
//   // device i holds layers [b[i], b[i+1])
//
// The default policy, split_by_speed(), needs what the devices measured
// (PlacementInput::speeds, runtime/probe.h) and what the model costs;
// docs/placement.md describes its model of time and its limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft {

// How fast a device computes and how far it is (runtime/probe.h measures
// it). Zeros: not measured. A local device has no link: latency and
// bandwidth 0.
struct DeviceSpeed {
  double seconds_per_byte = 0;  // a matrix-vector product's time per weight byte (decode is bound by these reads)
  double latency_seconds = 0;   // one way between this host and the device: half a round trip
  double bytes_per_second = 0;  // the link's bandwidth, host to device
  bool measured() const { return seconds_per_byte > 0; }
};

// What the model asks of the devices per token, for policies that predict
// time (split_by_speed). Device 0 holds the token embedding, the last device
// the output norm (and the output matrix, unless it is the embedding's).
struct ModelCosts {
  std::vector<size_t> layer_bytes;          // per layer: weights + KV cache (memory)
  std::vector<size_t> layer_read_bytes;     // per layer: weight bytes read per token (a MoE layer's used experts)
  size_t first_bytes = 0;                   // device 0's extra memory: the token embedding
  size_t last_bytes = 0;                    // the last device's: output norm (and output matrix)
  size_t output_read_bytes = 0;             // the output product's weight bytes, read per token
  bool output_on_first = false;             // tied embeddings: the product runs on device 0
  // Of layer_read_bytes, the experts' (a MoE layer's used share), and the
  // layers' expert count: what an expert split divides (predict_time).
  std::vector<size_t> layer_expert_read_bytes;  // empty: a dense model
  int64_t n_expert = 0;
  size_t activation_bytes = 0;              // one token's hidden state between two stages
  size_t logits_bytes = 0;                  // one token's logits, to the host
  bool known() const { return activation_bytes > 0; }  // a model has a hidden state
};

// What a policy may base its choice on.
struct PlacementInput {
  int64_t n_layer = 0;
  std::vector<size_t> free_bytes;  // one per device, in device order; 0: unknown
  std::vector<DeviceSpeed> speeds;  // one per device, or empty: not measured
  ModelCosts costs;                 // !costs.known(): unknown
  bool peer_links = true;           // workers push activations to each other (else through the host)
  // Several sequences in flight at once (`weft run --parallel`): the stages
  // work at the same time, so split_by_speed minimises the slowest stage
  // (the hop into it and its compute, the output product's included)
  // rather than their sum.
  bool pipelined = false;
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
// device reports any. The Session's default when it has no speeds.
std::unique_ptr<PlacementPolicy> split_by_free_memory();

// Layers where the predicted time per generated token is least (see
// predict_time; with PlacementInput::pipelined, the slowest stage's time,
// stage_seconds), within each device's free memory (weights and KV cache).
// Falls back to split_by_free_memory() when the input has no speeds or
// costs, or no placement fits.
std::unique_ptr<PlacementPolicy> split_by_speed();

// split_by_speed's choice, and why it fell back ("" when it did not).
struct SpeedPlacement {
  std::vector<int64_t> bounds;
  std::string fallback;
};
SpeedPlacement place_by_speed(const PlacementInput& in);

// The model behind split_by_speed, for one token of decoding (a single
// sequence: the stages run one after another). Stage d computes its layers'
// read bytes (plus the output product's, where it runs) at its
// seconds_per_byte; each hop between consecutive devices that take part
// (this host, device 0, the devices with layers, the last device, the
// output product's device, this host) costs the link's latency plus the
// bytes over its bandwidth. Between two workers: the slower link's latency
// and bandwidth with peer links, both links through the host without.
//
// With an expert split (experts: one count per device, summing to the
// model's n_expert), every layer's routed expert reads are shared out in
// proportion to the counts (routing assumed even over the experts): each
// device computes its share of every layer; a device holding a slice of a
// layer it does not hold costs that layer a round trip from the layer's
// device and back (counted in its link_seconds), and those round trips and
// slices run at once with the layer device's own slice: overlapped_seconds
// is what the sum of the parts counts twice (per layer, the parts' sum less
// the longest of them).
struct TimePrediction {
  std::vector<double> compute_seconds;  // per device
  std::vector<double> link_seconds;     // per device: the hops into it
  double return_seconds = 0;            // the hop back to this host
  double overlapped_seconds = 0;        // expert slices at once (above)
  double total() const;
};
// Throws Error(invalid_input) when in lacks speeds or costs for the bounds,
// or experts does not fit them.
TimePrediction predict_time(std::span<const int64_t> bounds, const PlacementInput& in,
                            std::span<const int64_t> experts = {});
// The same model for every layer cut by heads over all the devices (a
// tensor split; heads: n_devices + 1 query head boundaries from 0 to
// n_head). Device d computes its head share of every layer's read bytes at
// its seconds_per_byte, and a device with a link exchanges with this host
// twice per layer (the normalized input out, its partial sum back: each
// way once, an activation each; with peer links and two workers or more,
// the others' partials go to the first worker over their peer links and
// come back in its one sum); the devices work at once, so the layers
// take the slowest device's compute and exchanges (overlapped_seconds is
// the rest). Then the output product on the last device (the first when
// tied), its input sent there and the logits back. Throws
// Error(invalid_input) for bounds that do not fit the devices, or no costs.
TimePrediction predict_tensor_time(std::span<const int64_t> heads, int64_t n_head, const PlacementInput& in);

// The slowest stage of a prediction: a device's hops in plus its compute
// (the bound on tokens per second when every stage works at once).
double stage_seconds(const TimePrediction& t);

// "a,b,c" -> n_parts weights, each finite and >= 0, not all zero. Throws
// Error(invalid_input) naming the spec and flag (the option it came from).
std::vector<double> parse_split(const std::string& spec, size_t n_parts, const std::string& flag = "--split");

// "a,b/c,d": groups of weights separated by '/', n_parts weights in all
// (`--split-mode tensor`: each group of devices cuts its run of layers by
// heads, the groups a pipeline by layers). Each group as parse_split
// checks it; throws Error(invalid_input) naming the spec otherwise.
std::vector<std::vector<double>> parse_split_groups(const std::string& spec, size_t n_parts,
                                                    const std::string& flag = "--split");

// n_parts + 1 boundaries: part i holds layers [bounds[i], bounds[i+1]), in
// proportion to w (cumulative shares rounded to the nearest layer; the last
// boundary is n_layer). Throws Error(invalid_input) for no parts, a negative
// or non-finite weight, or all zero.
std::vector<int64_t> layer_bounds(const std::vector<double>& w, int64_t n_layer);

}  // namespace weft
