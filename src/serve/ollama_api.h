// Ollama's API as weft serves it (docs/serve.md): bodies of /api/chat and
// /api/generate checked and turned into an engine Job through the OpenAI
// mapping (api_bridge.h: the same sampler options, ranges and prompts),
// and the engine's events turned into Ollama's NDJSON lines and whole
// replies. Errors are Ollama's shape, {"error": "..."}.
//
//   OllamaRequest r = parse_ollama(body, /*chat=*/true, ctx);   // throws ApiError
//   ... engine.submit(r.job) ...
//   Json line = ollama_piece(r, meta, event.text);              // per event when r.stream
//   Json last = ollama_done(r, meta, whole_text, finished_event, seconds_since_arrival);
//
// Pure: no sockets, no threads (unit-tested directly).
#pragma once

#include <string>

#include "serve/openai_api.h"

namespace weft::serve {

struct OllamaRequest {
  bool chat = false;
  bool stream = true;      // Ollama streams unless "stream": false
  bool load_only = false;  // no prompt (generate) or no messages (chat): Ollama's "load the model" call
  std::string model;       // as the client named it (replies echo it)
  Job job;                 // empty when load_only
};

// Checks body and builds the request. /api/chat takes messages (role,
// content; images refused), /api/generate a prompt with an optional system
// text rendered by the chat template, or used as is with "raw": true.
// options: temperature, top_k, top_p, min_p, seed, num_predict, stop,
// repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty; the
// other Ollama options (num_ctx, num_gpu, mirostat, ...) are ignored.
// Throws ApiError (400) naming the field as Ollama names it.
OllamaRequest parse_ollama(const Json& body, bool chat, const ApiContext& ctx,
                           const RenderControl& render_control = {});

// Identity of one reply: the model name it echoes and its creation time.
struct OllamaMeta {
  std::string model;
  std::string created_at;  // RFC 3339, UTC (ollama_time())
};

// A line of a streamed reply carrying text (done: false).
Json ollama_piece(const OllamaRequest& r, const OllamaMeta& meta, const std::string& text);
// The last line of a stream (text: the finishing event's own), or the whole
// reply (text: all of it): done, done_reason and the counts and durations
// (nanoseconds; total_seconds from the request's arrival).
Json ollama_done(const OllamaRequest& r, const OllamaMeta& meta, const std::string& text, const Event& finish,
                 double total_seconds);
// The reply to a load_only request.
Json ollama_loaded(const OllamaRequest& r, const OllamaMeta& meta);

// Ollama's error body: {"error": message}.
Json ollama_error(const ApiError& e);

// Now as RFC 3339 in UTC with nanoseconds, as Ollama writes created_at.
std::string ollama_time();

}  // namespace weft::serve
