// GET /v1/pool (docs/serve.md, "The pool"): this host and each worker as
// the placement in force holds the model (then any a recovery dropped,
// marked lost), their traffic so far, and
// the engine's counters, as one JSON document the chat page's pool view
// polls. Counters are totals since start: a client takes rates (tokens/s,
// link bytes/s) from two polls and `uptime_seconds`.
#include <algorithm>
#include <chrono>
#include <thread>

#include "serve/route_helpers.h"
#include "weft/backend/cpu.h"

namespace weft::serve {

namespace {

// The word before " <unit>" in a worker CPU's description of itself
// ("host CPU, avx2 kernels, 4 threads"): its kernel level or threads; null
// where the text lacks it (an older worker, another device).
Json described(const std::string& text, const std::string& unit, bool number) {
  const size_t at = text.find(" " + unit);
  if (at == std::string::npos || at == 0) return nullptr;
  const size_t space = text.rfind(' ', at - 1);
  const size_t first = space == std::string::npos ? 0 : space + 1;
  const std::string word = text.substr(first, at - first);
  if (word.empty() || word.size() > 32) return nullptr;
  if (!number) return word;
  if (word.find_first_not_of("0123456789") != std::string::npos || word.size() > 6) return nullptr;
  return std::stoi(word);
}

// One device of the plan: where it is, what it holds, what it was
// predicted to take per token, and its link's totals (null once a
// recovery dropped it: then "lost").
Json device_json(const DevicePlan& d, const DeviceSpec& spec, const DeviceStats* stats, const SessionOptions& o,
                 double measured_ms = -1) {
  const bool remote = spec.kind == DeviceSpecKind::rpc;
  const int threads = spec.threads > 0 ? spec.threads
                      : o.device_options.cpu_threads > 0 ? o.device_options.cpu_threads
                                                         : static_cast<int>(std::thread::hardware_concurrency());
  Json j = {{"label", d.label},
            {"device", d.device_name},
            {"remote", remote},
            // A worker's kernels and threads are its own (`weft worker -t`), as it describes its device.
            {"simd", remote ? described(d.description, "kernels", false) : Json(cpu_simd_level())},
            {"threads", remote ? described(d.description, "threads", true) : Json(threads)},
            {"layers", {d.part.first_layer, d.part.last_layer}},
            {"heads", {d.part.first_head, d.part.last_head}},
            {"experts", d.part.n_experts},
            {"weight_bytes", d.part.weight_bytes},
            {"kv_cache_bytes", d.part.kv_cache_bytes},
            {"used_bytes", d.need_bytes()},
            {"free_bytes", d.free_bytes},
            {"predicted_ms_per_token", d.predicted_seconds * 1e3},
            {"predicted_link_ms_per_token", d.predicted_link_seconds * 1e3},
            // Its compute per step since the placement began, as of the engine's last idle moment.
            {"measured_ms_per_step", measured_ms >= 0 ? Json(measured_ms) : Json(nullptr)}};
  j["lost"] = stats == nullptr;
  if (stats)
    j["link"] = {{"bytes_sent", stats->rpc.bytes_sent},
                 {"bytes_received", stats->rpc.bytes_received},
                 {"round_trips", stats->rpc.round_trips},
                 {"wait_seconds", stats->rpc.wait_seconds}};
  else
    j["link"] = nullptr;
  return j;
}

Json engine_json(const EngineMetrics& m) {
  return {{"slots", m.slots},
          {"slots_busy", m.slots_busy},
          {"queue_length", m.queue_length},
          {"groups", m.groups},
          {"steps", m.steps},
          {"prompt_tokens", m.prompt_tokens},
          {"generated_tokens", m.generated_tokens},
          {"busy_seconds", m.busy_seconds},
          {"measured_ms_per_step", m.steps > 0 ? m.busy_seconds * 1e3 / static_cast<double>(m.steps) : 0.0},
          {"requests_finished", m.requests_finished},
          {"embeddings", m.embeddings},
          {"speculative_steps", m.speculative_steps},
          {"draft_tokens", m.drafted},
          {"draft_accepted", m.accepted},
          {"recoveries", m.recoveries},
          {"rejoins", m.rejoins},
          {"devices_lost", m.devices_lost},
          {"devices_joining", m.devices_joining},
          {"devices_leaving", m.devices_leaving},
          {"last_error", m.last_error}};
}

}  // namespace

Json pool_status(Server::Impl& s) {
  Engine& engine = loaded_engine(s);  // throws 503 while loading
  const EngineMetrics m = engine.metrics();
  // The placement in force (the engine's copy: a recovery or a rejoin
  // changes it), each device's link totals, then the devices a recovery
  // dropped as the load placed them, marked lost.
  const SessionOptions& o = s.session->options();  // device_options only: never changed after construction
  Json devices = Json::array();
  for (size_t i = 0; i < m.plan.devices.size() && i < m.device_specs.size(); ++i) {
    const DeviceSpec& spec = m.device_specs[i];
    const DeviceStats st{.label = spec.label(), .remote = spec.kind == DeviceSpecKind::rpc,
                         .rpc = spec.kind == DeviceSpecKind::rpc ? rpc_stats(spec.endpoint) : RpcStats{}};
    const double measured = i < m.device_ms_per_step.size() ? m.device_ms_per_step[i] : -1;
    devices.push_back(device_json(m.plan.devices[i], spec, &st, o, measured));
  }
  for (size_t i = 0; i < s.plan.devices.size() && i < o.devices.size(); ++i) {
    const DevicePlan& d = s.plan.devices[i];
    if (std::find(m.devices_lost.begin(), m.devices_lost.end(), d.label) != m.devices_lost.end())
      devices.push_back(device_json(d, parse_device_spec(o.devices[i]), nullptr, o));
  }
  const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  return {{"model", s.model_name},
          {"uptime_seconds", uptime},
          {"policy", m.plan.policy},
          {"n_ctx", m.plan.n_ctx},
          {"predicted_ms_per_token", m.plan.predicted_seconds * 1e3},
          {"devices", std::move(devices)},
          {"engine", engine_json(m)}};
}

}  // namespace weft::serve
