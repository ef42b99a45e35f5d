// Session: devices, placement, the plan and loading (include/weft/runtime/session.h).
#include "weft/runtime/session.h"

#include <cstdint>
#include <cstdio>

#include "weft/core/error.h"

namespace weft {

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

size_t DevicePlan::need_bytes() const {
  return part.kv_cache_bytes > SIZE_MAX - part.weight_bytes ? SIZE_MAX  // saturate, never wrap
                                                            : part.weight_bytes + part.kv_cache_bytes;
}

void LoadPlan::set_prediction(const TimePrediction& t, std::span<const DeviceSpeed> speeds) {
  predicted_seconds = t.total();
  predicted_overlap_seconds = t.overlapped_seconds;
  for (size_t i = 0; i < devices.size() && i < speeds.size(); ++i) {
    devices[i].speed = speeds[i];
    devices[i].predicted_seconds = t.compute_seconds[i];
    devices[i].predicted_link_seconds = t.link_seconds[i];
  }
}

std::string LoadPlan::problem() const {
  for (const DevicePlan& d : devices) {
    if (!d.fits())
      return d.label + " has " + format_bytes(d.free_bytes) + " free but its share needs " +
             format_bytes(d.need_bytes()) + " (change the split, or add devices)";
  }
  return {};
}

Session::Session(SessionOptions options) : options_(std::move(options)) {
  const std::string& where = options_.name;
  if (options_.devices.empty()) fail(ErrorKind::invalid_input, where, "no devices");
  for (const std::string& s : options_.devices) specs_.push_back(parse_device_spec(s));
  if (!options_.split.empty() && options_.placement)
    fail(ErrorKind::invalid_input, where, "both a split and a placement policy: give one");
  if (!options_.split.empty()) {  // refuse a bad split before connecting
    if (options_.split_mode == SessionOptions::SplitMode::tensor)
      (void)parse_split_groups(options_.split, specs_.size());
    else if (options_.split_mode == SessionOptions::SplitMode::automatic)
      fail(ErrorKind::invalid_input, where, "--split-mode auto chooses the shares: give no --split");
    else
      (void)parse_split(options_.split, specs_.size());
  }
  if (!options_.experts_split.empty()) (void)parse_split(options_.experts_split, specs_.size(), "--experts-split");
  file_ = GgufFile::open(options_.model);
  tokenizer_ = model::Tokenizer::from_gguf(*file_);
  params_ = model::LlamaParams::from_gguf(*file_);
  for (const DeviceSpec& spec : specs_) devices_.push_back(open_device(spec, options_.device_options));
  if (options_.probe && devices_.size() > 1) probe_devices();
  all_specs_ = specs_;  // what a rejoin restores
  all_speeds_ = speeds_;
  all_split_ = options_.split;
  all_experts_split_ = options_.experts_split;
}

Session::~Session() = default;

int64_t Session::n_ctx() const {
  return executor_ ? executor_->n_ctx() : 0;
}

LoadPlan Session::plan(int64_t n_ctx) const {
  const std::string& where = options_.name;
  if (!file_) fail(ErrorKind::invalid_input, where, "the model is loaded already: its file is closed");
  const size_t n = devices_.size();
  std::vector<size_t> free_bytes(n);  // asked once: a worker's answer is a round trip
  for (size_t i = 0; i < n; ++i) free_bytes[i] = devices_[i]->memory().free;
  using Mode = SessionOptions::SplitMode;
  if (n > 1 && options_.split_mode == Mode::tensor) return plan_by_heads(n_ctx, free_bytes);
  if (n > 1 && options_.split_mode == Mode::automatic) return plan_by_prediction(n_ctx, free_bytes);
  return plan_by_layers(n_ctx, free_bytes);
}

LoadPlan Session::plan_by_layers(int64_t n_ctx, const std::vector<size_t>& free_bytes) const {
  const std::string& where = options_.name;
  const size_t n = devices_.size();
  const PlacementInput in = placement_input(free_bytes, n_ctx);
  LoadPlan p;
  const std::vector<int64_t> b = bounds(in, p.policy);
  if (b.size() != n + 1 || b.front() != 0 || b.back() != params_.n_layer)
    fail(ErrorKind::internal, where, "the placement policy returned " + std::to_string(b.size()) + " bounds");
  std::vector<int64_t> experts;  // per device, with an expert split
  if (!options_.experts_split.empty()) {
    if (params_.n_expert == 0)
      fail(ErrorKind::invalid_input, where, "--experts-split: " + options_.model + " has no experts");
    const std::vector<int64_t> eb =
        layer_bounds(parse_split(options_.experts_split, n, "--experts-split"), params_.n_expert);
    std::string counts;
    for (size_t i = 0; i < n; ++i) {
      experts.push_back(eb[i + 1] - eb[i]);
      counts += (i ? " + " : "") + std::to_string(experts.back());
    }
    p.policy += "; experts " + counts + " of " + std::to_string(params_.n_expert) + " per layer (--experts-split " +
                options_.experts_split + ")";
  }
  // Checks every tensor the model reads before anything is allocated.
  const std::vector<model::PartPlan> parts =
      model::LlamaModel::plan(*file_, b, n_ctx, options_.load.cache_type, experts, options_.load.sliding_ring_step);
  p.n_ctx = n_ctx;
  p.cache_type = options_.load.cache_type;
  p.sliding_ring_rows = model::sliding_ring_rows(params_, n_ctx, options_.load.sliding_ring_step);
  for (size_t i = 0; i < n; ++i) {
    p.devices.push_back({specs_[i].label(), devices_[i]->name(), parts[i], free_bytes[i]});
    p.devices.back().description = devices_[i]->description();
  }
  if (!in.speeds.empty()) {
    const TimePrediction t = predict_time(b, in, experts);
    p.set_prediction(t, in.speeds);
  }
  return p;
}

LoadPlan Session::load(int64_t n_ctx, const model::LoadProgress& progress) {
  LoadPlan p = plan(n_ctx);
  load(p, progress);
  return p;
}

void Session::load(const LoadPlan& p, const model::LoadProgress& progress) {
  const std::string& where = options_.name;
  if (executor_) fail(ErrorKind::invalid_input, where, "the model is loaded already");
  const size_t n = devices_.size();
  if (p.devices.size() != n)
    fail(ErrorKind::invalid_input, where,
         "a plan for " + std::to_string(p.devices.size()) + " devices; this session has " + std::to_string(n));
  if (const std::string problem = p.problem(); !problem.empty()) fail(ErrorKind::out_of_memory, where, problem);
  const int64_t n_ctx = p.n_ctx;
  model::LoadOptions load = options_.load;
  load.expert_split.clear();
  int64_t experts = 0;
  for (const DevicePlan& d : p.devices) experts += d.part.n_experts;
  if (experts > 0)  // the plan's expert split
    for (const DevicePlan& d : p.devices) load.expert_split.push_back(d.part.n_experts);
  if (n == 1) {
    load.expert_split.clear();  // one device holds every expert anyway
    executor_ = std::make_unique<Executor>(*file_, *devices_[0], n_ctx, progress, load);
  } else {
    Placement placement;
    for (size_t i = 0; i < n; ++i)
      placement.parts.push_back({.device = devices_[i].get(),
                                 .label = p.devices[i].label,
                                 .first_layer = p.devices[i].part.first_layer,
                                 .last_layer = p.devices[i].part.last_layer,
                                 .first_head = p.devices[i].part.first_head,
                                 .last_head = p.devices[i].part.last_head,
                                 .ffn_share = p.devices[i].part.ffn_share});
    executor_ = std::make_unique<Executor>(*file_, placement, n_ctx, progress, load);
  }
  n_ctx_loaded_ = n_ctx;
  loaded_plan_ = p;
  decode_seconds_ = 0;  // a new placement: its own time per token
  decode_tokens_ = 0;
  file_.reset();  // the model and the tokenizer hold copies (or the mapping, for mapped weights)
  if (options_.recover && history_.capacity() < static_cast<size_t>(n_ctx))
    history_.reserve(static_cast<size_t>(n_ctx));  // a token's eval then allocates nothing
}

}  // namespace weft
