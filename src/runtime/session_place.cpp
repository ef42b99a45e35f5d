// Session: the probe at connect, and what a plan's placement policy is given
// (include/weft/runtime/session.h, docs/placement.md).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>

#include "weft/core/error.h"
#include "weft/runtime/probe.h"
#include "weft/runtime/session.h"

namespace weft {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Weight bytes a token reads in layer il: all but the experts, and of those
// the share a token uses; experts_only: that share alone.
size_t layer_read_bytes(const GgufFile& file, const model::LlamaParams& p, int64_t il, bool experts_only = false) {
  const std::string prefix = "blk." + std::to_string(il) + ".";
  double bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    const bool experts = t.name.find("_exps.") != std::string::npos && p.n_expert > 0;
    if (experts_only && !experts) continue;
    bytes += static_cast<double>(t.nbytes) *
             (experts ? static_cast<double>(p.n_expert_used) / static_cast<double>(p.n_expert) : 1.0);
  }
  return static_cast<size_t>(bytes);
}

// The probe's product is the largest matrix of layer 0 (its dtype, its
// rows), as big as the layers' reads per token, within 1 to 32 MiB.
ProbeOptions probe_options(const GgufFile& file, const model::LlamaParams& params, const RpcOptions& rpc) {
  ProbeOptions o;
  size_t layers = 0;
  for (int64_t l = 0; l < params.n_layer; ++l) layers += layer_read_bytes(file, params, l);
  o.weight_bytes = std::clamp(layers, kMiB, 32 * kMiB);
  const GgufTensorInfo* big = nullptr;
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name.rfind("blk.0.", 0) == 0 && t.supported && t.n_dims >= 2 && (big == nullptr || t.nbytes > big->nbytes))
      big = &t;
  if (big != nullptr) {
    o.weight_type = big->type;
    o.row_length = big->ne[0];
  }
  if (rpc.cache_min_bytes > 1) o.upload_chunk = std::min(o.upload_chunk, rpc.cache_min_bytes - 1);
  return o;
}

// What each layer costs: LlamaModel::plan with a part of its own per layer,
// and the embedding and the output in parts of their own.
ModelCosts model_costs(const GgufFile& file, const model::LlamaParams& p, int64_t n_ctx, DType cache_type,
                       int64_t sliding_ring_step) {
  std::vector<int64_t> bounds{0};
  for (int64_t l = 0; l <= p.n_layer; ++l) bounds.push_back(l);
  bounds.push_back(p.n_layer);
  const std::vector<model::PartPlan> parts =
      model::LlamaModel::plan(file, bounds, n_ctx, cache_type, {}, sliding_ring_step);
  ModelCosts c;
  c.first_bytes = parts.front().weight_bytes;
  c.last_bytes = parts.back().weight_bytes;
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    c.layer_bytes.push_back(parts[i].weight_bytes + parts[i].kv_cache_bytes);
    c.layer_read_bytes.push_back(layer_read_bytes(file, p, static_cast<int64_t>(i) - 1));
    if (p.n_expert > 0) c.layer_expert_read_bytes.push_back(layer_read_bytes(file, p, static_cast<int64_t>(i) - 1, true));
  }
  c.n_expert = p.n_expert;
  c.output_on_first = file.find_tensor("output.weight") == nullptr;  // tied: the embedding's matrix
  const GgufTensorInfo* out = file.find_tensor(c.output_on_first ? "token_embd.weight" : "output.weight");
  c.output_read_bytes = out != nullptr ? out->nbytes : 0;
  c.activation_bytes = static_cast<size_t>(p.n_embd) * sizeof(float);
  c.logits_bytes = static_cast<size_t>(p.n_vocab) * sizeof(float);
  return c;
}

}  // namespace

void Session::probe_devices() {
  const ProbeOptions o = probe_options(*file_, params_, options_.device_options.rpc);
  std::vector<DeviceSpeed> speeds;
  for (size_t i = 0; i < devices_.size(); ++i) {
    try {
      speeds.push_back(probe_device(*devices_[i], o));
    } catch (const Error& e) {
      probe_failure_ = "the probe of " + specs_[i].label() + " failed: " + e.what();
      return;
    }
  }
  speeds_ = std::move(speeds);
}

void Session::probe_joined(const std::vector<size_t>& places) {
  if (speeds_.empty()) return;  // placed without speeds: nothing to match
  const ProbeOptions o = probe_options(*file_, params_, options_.device_options.rpc);
  for (size_t i : places) {
    if (speeds_[i].measured()) continue;
    try {
      speeds_[i] = probe_device(*devices_[i], o);
    } catch (const Error& e) {
      probe_failure_ = "the probe of " + specs_[i].label() + " failed: " + e.what();
      speeds_.clear();
      return;
    }
  }
}

PlacementInput Session::placement_input(const std::vector<size_t>& free_bytes, int64_t n_ctx) const {
  PlacementInput in{.n_layer = params_.n_layer, .free_bytes = free_bytes};
  if (speeds_.empty()) return in;
  in.speeds = speeds_;
  in.costs = model_costs(*file_, params_, n_ctx, options_.load.cache_type, options_.load.sliding_ring_step);
  in.peer_links = options_.device_options.rpc.peer_links;
  in.pipelined = options_.pipelined;
  return in;
}

std::vector<int64_t> Session::bounds(const PlacementInput& in, std::string& policy) const {
  if (!options_.split.empty()) {
    policy = "split " + options_.split;
    return split_by_weights(parse_split(options_.split, devices_.size()))->layer_bounds(in);
  }
  if (options_.placement) {
    policy = options_.placement->describe();
    return options_.placement->layer_bounds(in);
  }
  if (!options_.experts_split.empty()) {  // this host routes: every layer's other weights here
    policy = "layers on " + specs_.front().label();
    std::vector<int64_t> b(in.free_bytes.size() + 1, in.n_layer);
    b.front() = 0;
    return b;
  }
  if (in.speeds.empty()) {
    policy = split_by_free_memory()->describe();
    if (!probe_failure_.empty()) policy += " (" + probe_failure_ + ")";
    return split_by_free_memory()->layer_bounds(in);
  }
  SpeedPlacement s = place_by_speed(in);
  policy = split_by_speed()->describe();
  if (!s.fallback.empty()) policy += ", fell back to free memory: " + s.fallback;
  return std::move(s.bounds);
}

LoadPlan Session::plan_by_heads(int64_t n_ctx, const std::vector<size_t>& free_bytes,
                                std::vector<std::vector<double>> groups) const {
  const size_t n = devices_.size();
  if (!options_.experts_split.empty())
    fail(ErrorKind::invalid_input, options_.name, "--experts-split with --split-mode tensor (give one or the other)");
  // Groups of devices, each cutting its run of layers by heads; the runs
  // in proportion to the groups' weights. One group by default.
  const std::string what = !groups.empty() ? "by speed" : options_.split.empty() ? "equal" : options_.split;
  if (groups.empty())
    groups = options_.split.empty() ? std::vector<std::vector<double>>{std::vector<double>(n, 1.0)}
                                    : parse_split_groups(options_.split, n);
  std::vector<double> group_weights;
  for (const std::vector<double>& g : groups) group_weights.push_back(std::accumulate(g.begin(), g.end(), 0.0));
  const std::vector<int64_t> runs = layer_bounds(group_weights, params_.n_layer);
  Placement placement;
  for (size_t g = 0, i = 0; g < groups.size(); ++g) {
    const bool cut = groups[g].size() > 1;
    const std::vector<int64_t> heads =
        cut ? head_bounds(groups[g], params_.n_head, params_.n_head_kv) : std::vector<int64_t>{0, 0};
    // More devices than key/value heads: the feed-forward goes by the weights.
    const bool by_weight = static_cast<int64_t>(groups[g].size()) > params_.n_head_kv;
    for (size_t k = 0; k < groups[g].size(); ++k, ++i)
      placement.parts.push_back({.device = devices_[i].get(),
                                 .label = specs_[i].label(),
                                 .first_layer = runs[g],
                                 .last_layer = runs[g + 1],
                                 .first_head = heads[k],
                                 .last_head = heads[k + 1],
                                 .ffn_share = by_weight ? groups[g][k] : 0.0});
  }
  const std::vector<model::TensorShare> shares = tensor_shares(*file_, placement);
  // A run's first device holds its layers (and adds the partials); the
  // others hold their shards only.
  const std::vector<int64_t> bounds = placement.layer_bounds();
  const std::vector<model::PartPlan> parts = model::LlamaModel::plan(
      *file_, bounds, n_ctx, options_.load.cache_type, {}, options_.load.sliding_ring_step, shares);
  LoadPlan p;
  p.policy = "tensor split " + what + ": " + placement.describe();
  p.n_ctx = n_ctx;
  p.cache_type = options_.load.cache_type;
  p.sliding_ring_rows = model::sliding_ring_rows(params_, n_ctx, options_.load.sliding_ring_step);
  for (size_t i = 0; i < n; ++i) {
    p.devices.push_back({specs_[i].label(), devices_[i]->name(), parts[i], free_bytes[i]});
    p.devices.back().part.ffn_share = placement.parts[i].ffn_share;
    p.devices.back().description = devices_[i]->description();
  }
  const PlacementInput in = placement_input(free_bytes, n_ctx);
  if (groups.size() == 1 && !in.speeds.empty()) {  // one run over every device: predicted
    std::vector<int64_t> heads{0};
    for (const PlacementPart& part : placement.parts) heads.push_back(part.last_head);
    const TimePrediction t = predict_tensor_time(heads, params_.n_head, in);
    p.set_prediction(t, in.speeds);
  }
  return p;
}

LoadPlan Session::plan_by_prediction(int64_t n_ctx, const std::vector<size_t>& free_bytes) const {
  LoadPlan layers = plan_by_layers(n_ctx, free_bytes);
  if (speeds_.empty() || !options_.experts_split.empty()) return layers;
  if (static_cast<int64_t>(devices_.size()) > params_.n_head_kv) {  // the model of time counts heads only
    layers.policy +=
        "; not by heads: more devices than key/value heads (--split-mode tensor gives the others "
        "feed-forward columns only)";
    return layers;
  }
  // Every layer cut by heads, each device's share in proportion to its speed.
  std::vector<double> speed;
  for (const DeviceSpeed& s : speeds_) speed.push_back(1.0 / s.seconds_per_byte);
  LoadPlan heads;
  try {
    heads = plan_by_heads(n_ctx, free_bytes, {speed});
  } catch (const Error& e) {  // more devices than key/value heads, blocks that do not cut
    layers.policy += "; not by heads: " + std::string(e.what());
    return layers;
  }
  char line[160];
  std::snprintf(line, sizeof line, " (auto: predicted %.3f ms/token by layers, %.3f by heads)",
                layers.predicted_seconds * 1e3, heads.predicted_seconds * 1e3);
  LoadPlan& chosen = heads.problem().empty() && heads.predicted_seconds < layers.predicted_seconds ? heads : layers;
  chosen.policy += line;
  return chosen;
}

}  // namespace weft
