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

// A metric without labels: its help, type and one value.
template <class V>
void single(std::ostringstream& o, const char* name, const char* type, const char* help, V value) {
  metric(o, name, type, help);
  o << name << ' ' << value << '\n';
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
    single(o, "weft_model_loaded", "gauge", "1 once the model is loaded and serving.",
           (state == ServerState::ready ? 1 : 0));
    single(o, "weft_model_load_progress", "gauge", "Fraction of the weights loaded.",
           progress);
    if (state == ServerState::ready) e = engine.get(), s = session.get();
  }
  if (!e) return o.str();
  const EngineMetrics m = e->metrics();
  single(o, "weft_requests_finished_total", "counter", "Completions that ran to their end (stop or length).",
         m.requests_finished);
  single(o, "weft_requests_cancelled_total", "counter", "Completions whose client left or whose time ran out.",
         m.requests_cancelled);
  single(o, "weft_requests_failed_total", "counter", "Completions whose generation failed (a worker died, ...).",
         m.requests_failed);
  single(o, "weft_requests_rejected_total", "counter", "Completions refused with 429: the queue was full.",
         m.requests_rejected);
  single(o, "weft_embeddings_total", "counter", "Embeddings requests served (their tokens in weft_prompt_tokens_total).",
         m.embeddings);
  single(o, "weft_prompt_tokens_total", "counter", "Prompt tokens evaluated (reused cache excluded).",
         m.prompt_tokens);
  single(o, "weft_generated_tokens_total", "counter", "Tokens generated.",
         m.generated_tokens);
  single(o, "weft_steps_total", "counter", "Batched model steps.",
         m.steps);
  single(o, "weft_speculative_steps_total", "counter",
         "Steps that were speculative rounds (a request decoded alone with --model-draft).", m.speculative_steps);
  single(o, "weft_draft_tokens_total", "counter", "Draft tokens the model judged in speculative rounds.", m.drafted);
  single(o, "weft_draft_accepted_total", "counter", "Draft tokens kept (of weft_draft_tokens_total).", m.accepted);
  single(o, "weft_recoveries_total", "counter", "Failed steps the model recovered from (a lost worker's share placed again).",
         m.recoveries);
  single(o, "weft_rejoins_total", "counter", "Lost workers taken back while idle (the placement as started restored).",
         m.rejoins);
  single(o, "weft_busy_seconds_total", "counter", "Seconds spent in batched steps.",
         m.busy_seconds);
  single(o, "weft_grammar_seconds_total", "counter",
         "Seconds of those spent masking tokens by grammars (finished requests).", m.grammar_seconds);
  single(o, "weft_tokens_per_second", "gauge", "Tokens (prompt and generated) per busy second, since start.",
         (m.busy_seconds > 0 ? static_cast<double>(m.prompt_tokens + m.generated_tokens) / m.busy_seconds : 0.0));
  single(o, "weft_queue_length", "gauge", "Requests waiting for a slot.",
         m.queue_length);
  single(o, "weft_slots_busy", "gauge", "Slots serving a request.",
         m.slots_busy);
  single(o, "weft_slots", "gauge", "Slots (requests decoded together).",
         m.slots);
  single(o, "weft_slot_groups", "gauge", "Groups of slots whose steps are in flight at once (one per stage, at most 4).",
         m.groups);
  const std::vector<DeviceStats> devices = s->stats();
  auto per_worker = [&](const char* name, const char* help, auto value) {
    metric(o, name, "counter", help);
    for (const DeviceStats& d : devices)
      if (d.remote) o << name << "{worker=\"" << label(d.label) << "\"} " << value(d.rpc) << '\n';
  };
  per_worker("weft_worker_bytes_sent_total", "Bytes sent to each worker.", [](const RpcStats& r) { return r.bytes_sent; });
  per_worker("weft_worker_bytes_received_total", "Bytes received from each worker.",
             [](const RpcStats& r) { return r.bytes_received; });
  per_worker("weft_worker_wait_seconds_total", "Seconds the host waited for each worker's replies.",
             [](const RpcStats& r) { return r.wait_seconds; });
  return o.str();
}

}  // namespace weft::serve
