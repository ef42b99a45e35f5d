// Anthropic's Messages API as weft serves it (POST /v1/messages,
// docs/serve.md): a body checked and turned into an engine Job through the
// OpenAI mapping (api_bridge.h: the same sampler, ranges and chat prompt),
// and the engine's events turned into a message or Anthropic's stream
// events (message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta, message_stop). Errors are Anthropic's
// shape: {"type": "error", "error": {"type", "message"}}.
//
//   MessagesRequest r = parse_messages(body, ctx);           // throws ApiError
//   ... engine.submit(r.job) ...
//   MessagesStream s(r, meta);                               // per request when r.stream
//   sink.write(s.events(event));                             // per event: SSE text
//   Json whole = message_response(r, meta, collected, tok);  // when not streamed
//
// Pure: no sockets, no threads (unit-tested directly).
#pragma once

#include <string>

#include "serve/openai_api.h"

namespace weft::serve {

struct MessagesRequest {
  bool stream = false;
  std::string model;  // as the client named it (replies echo it)
  Job job;
};

// Checks body: model, max_tokens (required), messages (user and assistant
// turns; content a string or text blocks), system (a string or text
// blocks), stop_sequences, temperature in [0, 1], top_p, top_k, stream;
// tools are rendered into the prompt as OpenAI-shaped functions, but
// tool_use and tool_result blocks are refused (not yet served). Throws
// ApiError (400) naming the field as Anthropic names it.
MessagesRequest parse_messages(const Json& body, const ApiContext& ctx, const RenderControl& render_control = {});

struct MessagesMeta {
  std::string id;  // "msg_…"
  std::string model;
};

// stop_reason and stop_sequence of a finished request: "end_turn" (the
// model ended it), "stop_sequence" (with the one that matched), or
// "max_tokens"; generated: every token the request produced.
struct StopInfo {
  std::string reason;
  std::string sequence;  // "" unless reason is stop_sequence
};
StopInfo stop_info(const Job& job, const Event& finish, const std::vector<int32_t>& generated,
                   const model::Tokenizer& tok);

// The whole reply of a request that was not streamed.
Json message_response(const MessagesRequest& r, const MessagesMeta& meta, const Collected& c,
                      const model::Tokenizer& tok);

// One streamed reply's events as server-sent-event text, in order: the
// first call opens the message and its text block; a finished event closes
// them with message_delta (stop_reason, usage) and message_stop; an event
// that ends in failure ("error", "cancelled") sends Anthropic's error event.
class MessagesStream {
 public:
  // tok must outlive this stream.
  MessagesStream(const MessagesRequest& r, MessagesMeta meta, const model::Tokenizer& tok)
      : job_(r.job), meta_(std::move(meta)), tok_(tok) {}
  std::string events(const Event& e);

 private:
  Job job_;  // its stop strings and prompt length
  MessagesMeta meta_;
  const model::Tokenizer& tok_;
  bool started_ = false;
  std::vector<int32_t> generated_;
};

// Anthropic's error body for e, its type from the status (400
// invalid_request_error, 401 authentication_error, 404 not_found_error,
// 413 request_too_large, 429 rate_limit_error, 503 overloaded_error, other
// 5xx api_error).
Json anthropic_error(const ApiError& e);

}  // namespace weft::serve
