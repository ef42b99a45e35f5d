// /metrics in Prometheus' text format (version 0.0.4): requests, tokens,
// speed, queue and slots, and each worker's traffic (docs/serve.md).
#include <sstream>

#include "serve/server_impl.h"

namespace weft::serve {

namespace {

// A label value with \, " and newlines escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void metric(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

std::string Server::Impl::metrics_text() {
  std::ostringstream o;
  o.precision(9);
  {
    std::lock_guard<std::mutex> lock(counts_mu);
    metric(o, "weft_http_requests_total", "counter", "HTTP requests answered, by path and status.");
    for (const auto& [key, n] : request_counts)
      o << "weft_http_requests_total{path=\"" << label(key.first) << "\",status=\"" << key.second << "\"} " << n
        << '\n';
  }
  Engine* e = nullptr;
  Session* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    metric(o, "weft_model_loaded", "gauge", "1 once the model is loaded and serving.");
    o << "weft_model_loaded " << (state == ServerState::ready ? 1 : 0) << '\n';
    metric(o, "weft_model_load_progress", "gauge", "Fraction of the weights loaded.");
    o << "weft_model_load_progress " << progress << '\n';
    if (state == ServerState::ready) e = engine.get(), s = session.get();
  }
  if (!e) return o.str();
  const EngineMetrics m = e->metrics();
  metric(o, "weft_requests_finished_total", "counter", "Completions that ran to their end (stop or length).");
  o << "weft_requests_finished_total " << m.requests_finished << '\n';
  metric(o, "weft_requests_cancelled_total", "counter", "Completions whose client left or whose time ran out.");
  o << "weft_requests_cancelled_total " << m.requests_cancelled << '\n';
  metric(o, "weft_requests_failed_total", "counter", "Completions whose generation failed (a worker died, ...).");
  o << "weft_requests_failed_total " << m.requests_failed << '\n';
  metric(o, "weft_requests_rejected_total", "counter", "Completions refused with 429: the queue was full.");
  o << "weft_requests_rejected_total " << m.requests_rejected << '\n';
  metric(o, "weft_prompt_tokens_total", "counter", "Prompt tokens evaluated (reused cache excluded).");
  o << "weft_prompt_tokens_total " << m.prompt_tokens << '\n';
  metric(o, "weft_generated_tokens_total", "counter", "Tokens generated.");
  o << "weft_generated_tokens_total " << m.generated_tokens << '\n';
  metric(o, "weft_steps_total", "counter", "Batched model steps.");
  o << "weft_steps_total " << m.steps << '\n';
  metric(o, "weft_busy_seconds_total", "counter", "Seconds spent in batched steps.");
  o << "weft_busy_seconds_total " << m.busy_seconds << '\n';
  metric(o, "weft_tokens_per_second", "gauge", "Tokens (prompt and generated) per busy second, since start.");
  o << "weft_tokens_per_second "
    << (m.busy_seconds > 0 ? static_cast<double>(m.prompt_tokens + m.generated_tokens) / m.busy_seconds : 0.0) << '\n';
  metric(o, "weft_queue_length", "gauge", "Requests waiting for a slot.");
  o << "weft_queue_length " << m.queue_length << '\n';
  metric(o, "weft_slots_busy", "gauge", "Slots serving a request.");
  o << "weft_slots_busy " << m.slots_busy << '\n';
  metric(o, "weft_slots", "gauge", "Slots (requests decoded together).");
  o << "weft_slots " << m.slots << '\n';
  const std::vector<DeviceStats> devices = s->stats();
  metric(o, "weft_worker_bytes_sent_total", "counter", "Bytes sent to each worker.");
  for (const DeviceStats& d : devices)
    if (d.remote) o << "weft_worker_bytes_sent_total{worker=\"" << label(d.label) << "\"} " << d.rpc.bytes_sent << '\n';
  metric(o, "weft_worker_bytes_received_total", "counter", "Bytes received from each worker.");
  for (const DeviceStats& d : devices)
    if (d.remote)
      o << "weft_worker_bytes_received_total{worker=\"" << label(d.label) << "\"} " << d.rpc.bytes_received << '\n';
  metric(o, "weft_worker_wait_seconds_total", "counter", "Seconds the host waited for each worker's replies.");
  for (const DeviceStats& d : devices)
    if (d.remote)
      o << "weft_worker_wait_seconds_total{worker=\"" << label(d.label) << "\"} " << d.rpc.wait_seconds << '\n';
  return o.str();
}

}  // namespace weft::serve
